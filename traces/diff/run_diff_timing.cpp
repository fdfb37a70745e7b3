// The step-time breakdown of two runs side by side: per stage from the rank traces, else step medians from the
// manifests.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "traces/diff/run_diff_steps.h"

namespace ddp::run_diff_detail {
namespace {

struct RankTiming {
  std::optional<double> step_median_ms, steps;
  std::array<std::optional<double>, kStageCount> per_step_ms{};
};

std::map<int, RankTiming> timing_from_traces(const DiffRun& r) {
  std::map<int, RankTiming> out;
  for (const RankSummary& s : r.traces) {
    RankTiming t;
    t.step_median_ms = s.step_median_ms;
    t.steps = static_cast<double>(s.steps);
    for (int i = 0; i < kStageCount; ++i)
      if (s.stages[i].count)
        t.per_step_ms[i] =
            static_cast<double>(s.stages[i].total_ns) / 1e6 / static_cast<double>(std::max<uint64_t>(s.steps, 1));
    out[static_cast<int>(s.rank)] = t;
  }
  return out;
}

std::map<int, RankTiming> timing_from_manifest(const DiffRun& r) {
  std::map<int, RankTiming> out;
  if (!r.manifest || !r.manifest->fields.ranks) return out;
  for (const records::manifest_rank& rk : *r.manifest->fields.ranks) {
    RankTiming t;
    t.step_median_ms = rk.step_time_median_ms.value_or(0);
    t.steps = static_cast<double>(rk.steps.value_or(0));
    if (t.step_median_ms) out[static_cast<int>(rk.rank)] = t;
  }
  return out;
}

std::optional<double> mean_of(const std::map<int, RankTiming>& m, std::optional<double> RankTiming::*field) {
  double sum = 0;
  int n = 0;
  for (const auto& [rank, t] : m)
    if (t.*field) {
      sum += *(t.*field);
      ++n;
    }
  if (!n) return std::nullopt;
  return sum / n;
}

std::optional<double> mean_stage(const std::map<int, RankTiming>& m, int stage) {
  double sum = 0;
  int n = 0;
  for (const auto& [rank, t] : m) {
    sum += t.per_step_ms[stage].value_or(0.0);  // a rank without spans of the stage spent no time in it
    ++n;
    (void)rank;
  }
  bool any = false;
  for (const auto& [rank, t] : m) any = any || t.per_step_ms[stage].has_value();
  if (!any || !n) return std::nullopt;
  return sum / n;
}

TimingBlock block(const std::optional<RankTiming>& a, const std::optional<RankTiming>& b, bool stages) {
  TimingBlock out;
  if (a) out.step_median_ms.a = a->step_median_ms, out.steps.a = a->steps;
  if (b) out.step_median_ms.b = b->step_median_ms, out.steps.b = b->steps;
  if (!stages) return out;
  for (int i = 0; i < kStageCount; ++i) {
    std::optional<double> va = a ? a->per_step_ms[i] : std::nullopt;
    std::optional<double> vb = b ? b->per_step_ms[i] : std::nullopt;
    if (!va && !vb) continue;
    // A stage seen in one run only took no time in the other (when that run has traces of that rank).
    if (!va && a) va = 0.0;
    if (!vb && b) vb = 0.0;
    out.stages.push_back({std::string(stage_name(static_cast<Stage>(i))), {va, vb}});
  }
  return out;
}

}  // namespace

TimingDiff diff_timing(const DiffRun& a, const DiffRun& b) {
  TimingDiff out;
  std::map<int, RankTiming> ta, tb;
  bool stages = false;
  if (a.has_traces && b.has_traces) {
    out.source = "traces";
    ta = timing_from_traces(a);
    tb = timing_from_traces(b);
    stages = true;
  } else {
    ta = timing_from_manifest(a);
    tb = timing_from_manifest(b);
    out.source = ta.empty() && tb.empty() ? "none" : "manifest";
    out.note =
        std::string("no per-stage breakdown: ") +
        (!a.has_traces && !b.has_traces ? "neither run has rank traces"
         : !a.has_traces                ? "run A has no rank traces"
                                        : "run B has no rank traces") +
        (out.source == "none" ? ", and neither manifest has per-rank step times" : "; step medians from the manifests");
  }
  RankTiming ma, mb;
  ma.step_median_ms = mean_of(ta, &RankTiming::step_median_ms);
  ma.steps = mean_of(ta, &RankTiming::steps);
  mb.step_median_ms = mean_of(tb, &RankTiming::step_median_ms);
  mb.steps = mean_of(tb, &RankTiming::steps);
  for (int i = 0; i < kStageCount; ++i) {
    ma.per_step_ms[i] = mean_stage(ta, i);
    mb.per_step_ms[i] = mean_stage(tb, i);
  }
  out.mean = block(ta.empty() ? std::nullopt : std::optional<RankTiming>(ma),
                   tb.empty() ? std::nullopt : std::optional<RankTiming>(mb), stages);
  std::set<int> ranks;
  for (const auto& [r, t] : ta) ranks.insert(r);
  for (const auto& [r, t] : tb) ranks.insert(r);
  for (int r : ranks) {
    auto ia = ta.find(r);
    auto ib = tb.find(r);
    out.ranks[r] = block(ia == ta.end() ? std::nullopt : std::optional<RankTiming>(ia->second),
                         ib == tb.end() ? std::nullopt : std::optional<RankTiming>(ib->second), stages);
  }
  return out;
}

}  // namespace ddp::run_diff_detail
