// The Chrome-trace adapter: events of a Chrome trace (ours or PyTorch profiler / Kineto) into the timeline model,
// streamed from the reader's callback without an intermediate copy.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <unordered_map>

#include "traces/base/parse_int.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/timeline/short_text.h"
#include "traces/timeline/timeline.h"
#include "traces/timeline/timeline_sources.h"

namespace ddp {
namespace {
// `needle` is lower case.
bool contains_ci(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && std::tolower(static_cast<unsigned char>(hay[i + k])) == needle[k]) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}
}  // namespace

uint8_t stage_for_chrome_event(std::string_view name, std::string_view cat) {
  if (auto s = stage_from_name(name)) return static_cast<uint8_t>(*s);
  if (name.rfind("ProfilerStep#", 0) == 0) return static_cast<uint8_t>(Stage::step);
  if (cat == "kernel") return static_cast<uint8_t>(contains_ci(name, "nccl") ? Stage::nccl : Stage::kernel);
  if (cat == "gpu_memcpy") {
    if (contains_ci(name, "htod")) return static_cast<uint8_t>(Stage::memcpy_h2d);
    if (contains_ci(name, "dtoh")) return static_cast<uint8_t>(Stage::memcpy_d2h);
    return kNoStage;
  }
  if (cat == "gpu_memset") return static_cast<uint8_t>(Stage::memset);
  return kNoStage;
}

namespace {

// A sort index from the file: clamped while still a double (a huge or infinite number would not convert).
int64_t sort_index(double v) {
  constexpr double kLimit = 9.0e18;
  return static_cast<int64_t>(std::isnan(v) ? 0.0 : std::clamp(v, -kLimit, kLimit));
}

bool arg_uint(const ChromeValue& v, uint64_t& out) {
  if (v.type != ChromeValue::number || !(v.num >= 0) || v.num > 1.8e19) return false;
  out = static_cast<uint64_t>(v.num);
  return true;
}

}  // namespace

namespace timeline_detail {

bool ChromeToTimeline::operator()(const ChromeEventView& e) {
  switch (e.ph) {
    case 'X':
      span(e, e.ts_ns, e.has_dur ? e.ts_ns + std::max<int64_t>(e.dur_ns, 0) : e.ts_ns);
      break;
    case 'B': {
      if (!e.has_ts) break;
      auto [p, l] = where(e);
      Open o;
      o.p = p;
      o.l = l;
      o.span = make_span(e, e.ts_ns, e.ts_ns);
      open_[key(p, l)].push_back(o);
      break;
    }
    case 'E': {
      if (!e.has_ts) break;
      auto [p, l] = where(e);
      auto it = open_.find(key(p, l));
      if (it == open_.end() || it->second.empty()) {
        ++unmatched_end_;
        break;
      }
      Span s = it->second.back().span;
      it->second.pop_back();
      s.set_t1(std::max(e.ts_ns, s.t0));
      b_.add_span(p, l, s);
      break;
    }
    case 'C': {
      if (!e.has_ts) break;
      int p = proc(e);
      for (size_t i = 0; i < e.arg_count; ++i) {
        const ChromeArg& a = e.args[i];
        if (a.value.type != ChromeValue::number) continue;
        std::string name(e.name);
        if (!(a.key == "value" || (e.arg_count == 1 && !e.name.empty()))) name += "." + std::string(a.key);
        b_.add_counter(p, name, e.ts_ns, a.value.num);
      }
      break;
    }
    case 'i':
    case 'I':
    case 'R':  // a mark: an instant as far as a timeline goes
      if (!e.has_ts) break;
      if (e.name == "[memory]") {  // Kineto's allocator samples
        int p = proc(e);
        for (const char* k : {"Total Allocated", "Total Reserved"})
          if (const ChromeValue* v = e.arg(k); v && v->is_number()) b_.add_counter(p, k, e.ts_ns, v->num);
        break;
      }
      // As Perfetto draws them: a zero-length slice on the thread ("s": "t", the default) or the process's lane of
      // that tid ("p"); global ones ("g": Kineto's "Iteration Start", "Record Window End") belong to no process and
      // go on one track of their own, as Perfetto's global track.
      if (e.scope == "g") {
        const int p = b_.process(kGlobalProcess);
        b_.add_span(p, b_.lane(p, kGlobalProcess), make_span(e, e.ts_ns, e.ts_ns));
      } else {
        span(e, e.ts_ns, e.ts_ns);
      }
      break;
    case 'M':
      metadata(e);
      break;
    default:
      break;  // flows ('s'/'f'), async and other phases are not drawn
  }
  return true;
}

void ChromeToTimeline::close(int64_t end_ns) {
  uint64_t unclosed = 0;
  for (auto& kv : open_)
    for (Open& o : kv.second) {
      o.span.set_t1(std::max(end_ns, o.span.t0));
      b_.add_span(o.p, o.l, o.span);
      ++unclosed;
    }
  open_.clear();
  if (unclosed) b_.problem(std::to_string(unclosed) + " \"B\" events without an \"E\" (closed at the trace's end)");
  if (unmatched_end_) b_.problem(std::to_string(unmatched_end_) + " \"E\" events without a \"B\" (ignored)");
}

int ChromeToTimeline::proc(const ChromeEventView& e) {
  std::string_view pid = e.pid.key();
  if (last_proc_ >= 0 && pid == last_pid_) return last_proc_;
  last_pid_.assign(pid);
  return last_proc_ = b_.process(pid);
}

namespace {
// Thread and process keys are a few digits: compared inline (a library call per compare cost more than the compare).
bool same_key(const std::string& kept, std::string_view k) {
  if (kept.size() != k.size()) return false;
  for (size_t i = 0; i < k.size(); ++i)
    if (kept[i] != k[i]) return false;
  return true;
}
}  // namespace

ChromeToTimeline::ShortKey ChromeToTimeline::short_key(std::string_view k) {
  ShortKey key;
  if (k.size() > 8) return key;
  key.size = static_cast<uint32_t>(k.size());
  key.bits = short_text_bits(k);
  return key;
}

std::pair<int, int> ChromeToTimeline::where(const ChromeEventView& e) {
  const std::string_view pid = e.pid.key(), tid = e.tid.key();
  const ShortKey pid_key = short_key(pid), tid_key = short_key(tid);
  const bool short_keys = pid_key.size != ShortKey::kLong && tid_key.size != ShortKey::kLong;
  auto same_lane = [&](const RecentLane& r) {
    if (r.p < 0) return false;
    if (short_keys) return r.tid_key == tid_key && r.pid_key == pid_key;  // a long key's size never matches
    return same_key(r.tid, tid) && same_key(r.pid, pid);
  };
  // Threads take turns in a trace, each for a run of events: the last lane first, then the few recent ones.
  const RecentLane& last = recent_lanes_[last_recent_lane_];
  if (same_lane(last)) return {last.p, last.l};
  for (size_t i = 0; i < recent_lanes_.size(); ++i) {
    const RecentLane& r = recent_lanes_[i];
    if (same_lane(r)) {
      last_recent_lane_ = i;
      return {r.p, r.l};
    }
  }
  last_recent_lane_ = next_recent_lane_++ % recent_lanes_.size();
  RecentLane& r = recent_lanes_[last_recent_lane_];
  r.p = proc(e);
  r.l = b_.lane(r.p, tid);
  r.pid.assign(pid);
  r.tid.assign(tid);
  r.pid_key = pid_key;
  r.tid_key = tid_key;
  return {r.p, r.l};
}

namespace {

// The args a span's own fields take (shown through them, not in the args text), and two of our own export's that are
// never shown. Every arg of every event asks, so the key's length and first letter pick the one name it can be before
// any bytes are compared (Kineto's keys, "External id", "Ev Idx", ..., are none of them).
enum class OwnField : uint8_t { none, hidden, step, epoch, micro, bucket, bytes };

// `k` is as long as `name` (the caller switched on its size): a compare of known length, inlined.
template <size_t N>
bool key_is(std::string_view k, const char (&name)[N]) {
  return std::memcmp(k.data(), name, N - 1) == 0;
}

[[gnu::always_inline]] inline OwnField own_field(std::string_view k) {
  switch (k.size()) {
    case 4:
      return k[0] == 's' && key_is(k, "step") ? OwnField::step : OwnField::none;
    case 5:
      switch (k[0]) {
        case 'b':
          if (key_is(k, "batch")) return OwnField::hidden;  // part of our own export; not shown
          return key_is(k, "bytes") ? OwnField::bytes : OwnField::none;
        case 'B':
          return key_is(k, "Bytes") ? OwnField::bytes : OwnField::none;
        case 'e':
          return key_is(k, "epoch") ? OwnField::epoch : OwnField::none;
        case 'm':
          return key_is(k, "micro") ? OwnField::micro : OwnField::none;
        default:
          return OwnField::none;
      }
    case 6:
      return k[0] == 'b' && key_is(k, "bucket") ? OwnField::bucket : OwnField::none;
    case 7:
      return k[0] == 's' && key_is(k, "samples") ? OwnField::hidden : OwnField::none;  // our own export; not shown
    default:
      return OwnField::none;
  }
}

// The field `a` fills, none when its key names one but its value is not a count (then it is shown as text).
[[gnu::always_inline]] inline OwnField own_field(const ChromeArg& a, uint64_t& value) {
  const OwnField f = own_field(a.key);
  if (f == OwnField::none || f == OwnField::hidden) return f;
  return arg_uint(a.value, value) ? f : OwnField::none;
}

}  // namespace

bool args_can_be_read_again(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && !chrome_file_is_gzip(path);
}

bool append_shown_args(const ChromeEventView& e, std::string& out) {
  const size_t before = out.size();
  for (size_t i = 0; i < e.arg_count; ++i) {
    const ChromeArg& a = e.args[i];
    uint64_t u = 0;
    if (own_field(a, u) != OwnField::none || out.size() - before >= 240) continue;
    if (out.size() > before) out += "\n";
    out.append(a.key);
    out += ": ";
    out.append(a.value.text.substr(0, 120));
  }
  return out.size() > before;
}

Span ChromeToTimeline::make_span(const ChromeEventView& e, int64_t t0, int64_t t1) {
  Span s;
  s.t0 = t0;
  s.set_t1(t1);
  last_ts_ = std::max(last_ts_, t1);
  s.name = b_.intern(e.name);
  s.stage = stage_of(s.name, e);
  uint64_t bytes = 0;
  uint16_t bucket = kNoBucket, epoch = 0;
  uint8_t micro = 0;
  bool shown = false;  // an arg for the args text
  for (size_t i = 0; i < e.arg_count; ++i) {
    uint64_t u = 0;
    switch (own_field(e.args[i], u)) {
      case OwnField::none:
        shown = true;
        break;
      case OwnField::hidden:
        break;
      case OwnField::step:
        s.set_step(u);
        break;
      case OwnField::epoch:
        epoch = static_cast<uint16_t>(std::min<uint64_t>(u, 0xFFFF));
        break;
      case OwnField::micro:
        micro = static_cast<uint8_t>(std::min<uint64_t>(u, 0xFF));
        break;
      case OwnField::bucket:
        bucket = static_cast<uint16_t>(std::min<uint64_t>(u, kNoBucket));
        break;
      case OwnField::bytes:
        bytes = u;
        break;
    }
  }
  if (s.step == kNoStep && s.stage == static_cast<uint8_t>(Stage::step) && e.name.rfind("ProfilerStep#", 0) == 0) {
    int64_t n = 0;
    if (parse_decimal(e.name.substr(13), n) && n >= 0) s.set_step(static_cast<uint64_t>(n));
  }
  uint32_t text_id = 0;
  if (shown && args_file_ != kNoFile) {
    text_id = b_.extras().add_place(args_file_, e.offset);
  } else if (shown) {
    extra_.clear();  // reused: a span's args text outgrows a string's inline buffer
    append_shown_args(e, extra_);
    text_id = b_.extras().add(extra_);
  }
  s.detail = b_.add_detail(bytes, bucket, text_id, epoch, micro);
  return s;
}

uint8_t ChromeToTimeline::stage_of(uint32_t name, const ChromeEventView& e) {
  // The category matters only for the GPU ones stage_for_chrome_event looks at.
  size_t cat = 0;
  if (e.cat.size() == 6 && e.cat == "kernel")
    cat = 1;
  else if (e.cat.size() == 10 && e.cat == "gpu_memcpy")
    cat = 2;
  else if (e.cat.size() == 10 && e.cat == "gpu_memset")
    cat = 3;
  std::vector<uint8_t>& known = stage_by_name_[cat];
  if (known.size() <= name) known.resize(name + 1, kNotLookedUp);
  if (known[name] == kNotLookedUp) known[name] = stage_for_chrome_event(e.name, e.cat);
  return known[name];
}

void ChromeToTimeline::span(const ChromeEventView& e, int64_t t0, int64_t t1) {
  if (!e.has_ts) return;
  auto [p, l] = where(e);
  b_.add_span(p, l, make_span(e, t0, t1));
}

void ChromeToTimeline::metadata(const ChromeEventView& e) {
  const ChromeValue* v = nullptr;
  if (e.name == "process_name" && (v = e.arg("name")) && v->type == ChromeValue::string) {
    b_.set_process_name(proc(e), v->text);
  } else if (e.name == "process_labels" && (v = e.arg("labels")) && v->type == ChromeValue::string) {
    b_.set_process_labels(proc(e), v->text);
  } else if (e.name == "process_sort_index" && (v = e.arg("sort_index")) && v->is_number()) {
    b_.set_process_sort(proc(e), sort_index(v->num));
  } else if (e.name == "thread_name" && (v = e.arg("name")) && v->type == ChromeValue::string) {
    auto [p, l] = where(e);
    b_.set_lane_name(p, l, v->text);
  } else if (e.name == "thread_sort_index" && (v = e.arg("sort_index")) && v->is_number()) {
    auto [p, l] = where(e);
    b_.set_lane_sort(p, l, sort_index(v->num));
  }
}

}  // namespace timeline_detail

namespace {

using timeline_detail::ChromeToTimeline;

// `parse` reads the trace (a text in memory, or a file) into the callback it is given.
using ChromeParse = std::function<ChromeStatus(const ChromeEventFn&, ChromeDocInfo&)>;

// `plain_file`: the events come from that plain JSON file, where their args can be read again (args_in_file).
bool build_from_chrome(const ChromeParse& parse, const std::string& source, bool plain_file, Timeline& out,
                       std::string& error) {
  TimelineBuilder b;
  ChromeToTimeline conv(b);
  if (plain_file) conv.args_in_file(source);
  ChromeDocInfo info;
  ChromeStatus st = parse(std::ref(conv), info);
  if (!st.ok()) {
    error = source.empty() || chrome_error_names_file(st.error) ? st.message : source + ": " + st.message;
    return false;
  }
  if (!info.not_strict.empty()) b.problem(info.not_strict);
  conv.close(conv.last_ts());
  b.timeline().producer = info.producer();
  b.timeline().source = source;
  out = b.finish();
  if (out.producer == "ddp_profile")
    for (Process& p : out.processes) {
      int64_t r = 0;
      if (parse_decimal(p.key, r)) p.rank = static_cast<int>(r);
    }
  if (out.span_count == 0 && out.counter_samples == 0) out.problems.push_back("the trace holds no spans or counters");
  return true;
}

}  // namespace

bool timeline_from_chrome_text(std::string_view json, Timeline& out, std::string& error) {
  try {
    return build_from_chrome(
        [json](const ChromeEventFn& fn, ChromeDocInfo& info) { return parse_chrome_json(json, fn, info); }, "", false,
        out, error);
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
}

bool timeline_from_chrome_file(const std::string& path, Timeline& out, std::string& error) {
  try {
    return build_from_chrome(
        [&path](const ChromeEventFn& fn, ChromeDocInfo& info) { return parse_chrome_file(path, fn, info); }, path,
        timeline_detail::args_can_be_read_again(path), out, error);
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
}

}  // namespace ddp
