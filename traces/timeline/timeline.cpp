// The timeline model itself: interned names, step lookup and colours. Building it is in timeline_builder.cpp, the
// loaders in timeline_from_run.cpp and timeline_from_chrome.cpp, queries in timeline_lod.cpp and timeline_stats.cpp.
#include "traces/timeline/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "traces/timeline/short_text.h"

namespace ddp {

StringTable::StringTable() {
  for (int i = 0; i < kStageCount; ++i) intern(stage_name(static_cast<Stage>(i)));
}

namespace {
// A name's first and last eight bytes (overlapping when it is shorter than 16; a name under 8 bytes: its first and last
// four, or under 4 its bytes, in `head`). With the size that is every byte of a name of up to 16, which most are
// ("aten::copy_", "ProfilerStep#12"): compared without a call to memcmp.
struct NameEnds {
  uint64_t head = 0, tail = 0;
};
NameEnds name_ends(std::string_view s) {
  NameEnds e;
  const char* d = s.data();
  if (s.size() >= 8) {
    std::memcpy(&e.head, d, 8);
    std::memcpy(&e.tail, d + s.size() - 8, 8);
  } else {
    e.head = short_text_bits(s);
  }
  return e;
}
// A slot for a name from its size and ends (names share prefixes like "aten::").
size_t recent_slot(const NameEnds& e, size_t size, size_t slots) {
  const uint64_t h =
      (e.head * 0x9E3779B97F4A7C15ull) ^ (e.tail * 0xC2B2AE3D27D4EB4Full) ^ (size * 0x165667B19E3779F9ull);
  return static_cast<size_t>(h >> 40) & (slots - 1);
}
}  // namespace

uint32_t StringTable::intern(std::string_view s) {
  if (recent_.empty()) recent_.resize(kRecentSlots);  // a new table, or one moved from
  const NameEnds ends = name_ends(s);
  Recent& r = recent_[recent_slot(ends, s.size(), kRecentSlots)];
  if (r.data && r.size == s.size() && r.head == ends.head && r.tail == ends.tail &&
      (s.size() <= 16 || std::memcmp(r.data + 8, s.data() + 8, s.size() - 16) == 0))
    return r.id;
  uint32_t id = 0;
  if (auto it = index_.find(s); it != index_.end()) {
    id = it->second;
  } else {
    strings_.emplace_back(s);
    id = static_cast<uint32_t>(strings_.size() - 1);
    index_.emplace(std::string_view(strings_.back()), id);
  }
  r = Recent{strings_[id].data(), ends.head, ends.tail, s.size(), id};
  return id;
}

std::optional<uint32_t> StringTable::find(std::string_view s) const {
  auto it = index_.find(s);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool Timeline::step_range(uint32_t step, int64_t& t0, int64_t& t1) const {
  bool found = false;
  for (const Process& p : processes) {
    auto it = std::lower_bound(p.steps.begin(), p.steps.end(), step,
                               [](const StepMark& m, uint32_t s) { return m.step < s; });
    // steps are sorted by t0, which for one process is also step order; fall back to a scan if not
    if (it == p.steps.end() || it->step != step)
      it = std::find_if(p.steps.begin(), p.steps.end(), [&](const StepMark& m) { return m.step == step; });
    if (it == p.steps.end()) continue;
    t0 = found ? std::min(t0, it->t0) : it->t0;
    t1 = found ? std::max(t1, it->t1) : it->t1;
    found = true;
  }
  return found;
}

uint32_t name_color(std::string_view name) {
  uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  // hue from the hash, moderate saturation/value so text stays readable on top
  double hue = (h % 360u) / 60.0;
  double s = 0.45 + ((h >> 12) % 20) / 100.0, v = 0.70 + ((h >> 20) % 20) / 100.0;
  double c = v * s, x = c * (1 - std::fabs(std::fmod(hue, 2.0) - 1)), m = v - c;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(hue)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  auto to8 = [m](double f) { return static_cast<uint32_t>(std::lround((f + m) * 255.0)) & 0xFF; };
  return 0xFF000000u | (to8(b) << 16) | (to8(g) << 8) | to8(r);
}

}  // namespace ddp
