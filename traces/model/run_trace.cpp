#include "traces/model/run_trace.h"

#include <algorithm>
#include <limits>

namespace ddp {

int64_t RunTrace::origin_ns() const {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& r : ranks) {
    int64_t off = r.clock_offset_ns();
    for (const auto& e : r.events) origin = std::min(origin, e.t0 + off);
  }
  return origin == std::numeric_limits<int64_t>::max() ? 0 : origin;
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
  nlohmann::json j = {
      {"files", out_files}, {"reference_rank", reference_rank}, {"clock_alignment", clock_alignment}, {"notes", notes}};
  if (!cycles.is_null()) j["cycles"] = cycles;
  return j;
}

nlohmann::json RunTrace::exported_manifest() const {
  if (!kineto && !step_window) return manifest;
  nlohmann::json m = manifest.is_object() ? manifest : nlohmann::json::object();
  if (kineto) m["kineto"] = kineto->to_json();
  if (step_window) m["step_window"] = {step_window->first, step_window->last};
  return m;
}

}  // namespace ddp
