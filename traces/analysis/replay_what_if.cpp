// The what-if of --analyze: the replay's fit and its held-out validation, and per top cause the step predicted
// without it.
#include "traces/analysis/replay_what_if.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "traces/analysis/analysis_attribution.h"
#include "traces/replay/replay.h"
#include "traces/replay/replay_holdout.h"
#include "traces/replay/replay_trust.h"

namespace ddp::analysis_detail {
namespace {

// Causes given a prediction: the ones a user reads first (each costs one replay of the run: the fit is shared).
constexpr size_t kWhatIfCauses = 5;

// The edit that removes a cause: its rank's stage as on the median rank; none for a cause of no single rank, or of a
// stage the replay does not run as time of its own (editable(): a wait, the collective, worker_start).
std::optional<ReplayEdit> edit_for(const StallCause& c) {
  if (c.rank < 0) return std::nullopt;
  ReplayEdit e;
  e.rank = c.rank;
  if (c.stage == kUntrackedCauseName) {
    e.other = true;
    return e;
  }
  const std::optional<Stage> s = stage_from_name(c.stage);
  if (!s || !editable(*s)) return std::nullopt;
  e.stage = *s;
  return e;
}

// The cores every saturated host would need for no thread to wait: its runnable threads, rounded up; 0 when none is.
double enough_cores(const std::vector<HostCpu>& hosts) {
  double n = 0;
  for (const HostCpu& h : hosts)
    if (h.saturated) n = std::max(n, std::ceil(h.runnable));
  return n;
}

// The cores' cause (rank -1, "cpu") is worth what enough cores buy, no more: the waits the attribution charged to it
// add up what every thread waited, but the step on enough cores still waits for whatever else holds it (a loader
// slow on any cores). Its loss is cut to the replay's gain with the cores every saturated host needs (cores=N), said
// in its evidence; a cause that buys nothing is dropped.
void price_the_cores(Analysis& a, const ReplayResult& fit, const RunReplay& run) {
  const double cores = enough_cores(a.cpu);
  auto it = std::find_if(a.causes.begin(), a.causes.end(),
                         [](const StallCause& c) { return c.rank < 0 && c.stage == kCoresCauseName; });
  if (cores <= 0 || it == a.causes.end()) return;
  ReplayEdit e;
  e.kind = ReplayEdit::Kind::cores;
  e.value = cores;
  const ReplayResult r = run.replay({e});
  if (!r.ok) return;
  StallCause& c = *it;
  c.what_if_step_ms = r.step_ms;
  c.evidence["enough_cores"] = cores;
  const double gain = std::max(0.0, fit.step_ms - r.step_ms);
  if (gain >= c.lost_ms_per_step) return;
  c.evidence["waits_ms_per_step"] = c.lost_ms_per_step;
  c.lost_ms *= c.lost_ms_per_step > 0 ? gain / c.lost_ms_per_step : 0;
  c.lost_ms_per_step = gain;
  c.share = a.step_ms > 0 ? gain / a.step_ms : 0;
  c.evidence["lost_ms_per_step"] = gain;
  if (c.share < kMinCauseShare) a.causes.erase(it);
  std::stable_sort(a.causes.begin(), a.causes.end(),
                   [](const StallCause& x, const StallCause& y) { return x.lost_ms > y.lost_ms; });
}

// A burst's cause (loader_burst.h) is priced by the queue that would hide it: the replay with prefetch=K and with
// workers=N (each alone), said in its evidence; its step without it is the deeper prefetch's, the fix that costs no
// more processes or cores.
void price_the_burst(StallCause& c, const RunReplay& run) {
  const nlohmann::json& b = c.evidence["burst"];
  nlohmann::json hidden = nlohmann::json::array();
  for (auto [kind, key, name] : {std::tuple(ReplayEdit::Kind::prefetch, "prefetch_to_hide", "prefetch"),
                                 std::tuple(ReplayEdit::Kind::workers, "workers_to_hide", "workers")}) {
    ReplayEdit e;
    e.kind = kind;
    e.value = b[key].get<double>();
    const ReplayResult r = run.replay({e});
    if (!r.ok) continue;
    hidden.push_back({{"edit", std::string(name) + "=" + std::to_string(b[key].get<int>())}, {"step_ms", r.step_ms}});
    if (kind == ReplayEdit::Kind::prefetch) c.what_if_step_ms = r.step_ms;
  }
  c.evidence["hidden_by"] = hidden;
}

}  // namespace

void add_what_if(Analysis& a, const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                 const std::vector<HostCores>& hosts) {
  // The held-out halves first, each dropped before the run is made ready (the two are never held at once); then the
  // fit made once for every replay below (RunReplay).
  ReplayHoldout holdout = replay_holdout(data, common);
  const RunReplay run(data, common, hosts);
  ReplayResult fit = run.replay();
  fit.holdout = std::move(holdout);
  a.replay.ok = fit.ok;
  if (!fit.ok) {
    a.replay.error = fit.error;
    return;
  }
  a.replay.step_error_mean = fit.error_mean;
  a.replay.step_error_p90 = fit.error_p90;
  a.replay.replayed_step_ms = fit.step_ms;
  a.replay.holdout_ok = fit.holdout.ok;
  a.replay.holdout_error_mean = fit.holdout.error_mean;
  a.replay.holdout_error_p90 = fit.holdout.error_p90;
  a.replay.holdout_mean_step_error = fit.holdout.mean_step_error;
  a.replay.holdout_steps = fit.holdout.steps;
  a.replay.trusted = trusted(fit);
  a.replay.untrusted_reason = distrust_reason(fit);
  price_the_cores(a, fit, run);
  for (size_t i = 0; i < a.causes.size() && i < kWhatIfCauses; ++i) {
    if (a.causes[i].evidence.contains("burst")) {
      price_the_burst(a.causes[i], run);
      continue;
    }
    std::optional<ReplayEdit> e = edit_for(a.causes[i]);
    if (e) e = edit_for_traces(*e, data);
    if (!e) continue;
    const ReplayResult r = run.replay({*e});
    if (r.ok) a.causes[i].what_if_step_ms = r.step_ms;
  }
}

}  // namespace ddp::analysis_detail
