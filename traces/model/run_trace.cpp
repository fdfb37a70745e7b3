#include "traces/model/run_trace.h"

#include <algorithm>
#include <limits>

#include "traces/model/run_folder.h"

namespace ddp {

int64_t RunTrace::origin_ns() const {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& r : ranks) {
    int64_t off = r.clock_offset_ns();
    for (const auto& e : r.events) origin = std::min(origin, e.t0 + off);
  }
  return origin == std::numeric_limits<int64_t>::max() ? 0 : origin;
}

uint32_t RunTrace::world_size() const {
  uint32_t world = static_cast<uint32_t>(ranks.size());
  for (const RankTrace& r : ranks) world = std::max({world, r.world, r.rank + 1});
  if (manifest && manifest->fields.world_size > 0 && manifest->fields.world_size <= int64_t{kMaxWorldSize})
    world = std::max(world, static_cast<uint32_t>(manifest->fields.world_size));
  if (world > kMaxWorldSize) {  // a damaged header: the ranks present are what is known
    world = 0;
    for (const RankTrace& r : ranks) world = std::max(world, r.rank + 1);
  }
  return world;
}

nlohmann::json KinetoImportReport::to_json() const {
  nlohmann::json out_files = nlohmann::json::array();
  for (const KinetoFileRead& f : files) {
    out_files.push_back({{"rank", f.rank},
                         {"file", f.file},
                         {"base_ns", f.base_ns},
                         {"rank_from", f.rank_from},
                         {"format", f.format},
                         {"events", f.events},
                         {"cut_off", f.cut_off}});
    if (!f.digest.empty()) out_files.back()["digest"] = f.digest;
  }
  nlohmann::json alignment = nlohmann::json::array();
  for (const records::clock_alignment& a : clock_alignment) alignment.push_back(records::to_json(a));
  nlohmann::json j = {
      {"files", out_files}, {"reference_rank", reference_rank}, {"clock_alignment", alignment}, {"notes", notes}};
  if (!cycles.is_null()) j["cycles"] = cycles;
  return j;
}

nlohmann::json RunTrace::exported_manifest() const {
  nlohmann::json m = manifest ? to_json(*manifest) : nlohmann::json();
  if (!kineto && !step_window) return m;
  if (!m.is_object()) m = nlohmann::json::object();
  if (kineto) m["kineto"] = kineto->to_json();
  if (step_window) m["step_window"] = {step_window->first, step_window->last};
  return m;
}

}  // namespace ddp
