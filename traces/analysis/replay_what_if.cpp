// The what-if of --analyze: the replay's fit and its held-out validation, and per top cause the step predicted
// without it.
#include "traces/analysis/replay_what_if.h"

#include "traces/replay/replay.h"
#include "traces/replay/replay_holdout.h"
#include "traces/replay/replay_trust.h"

namespace ddp::analysis_detail {
namespace {

// Causes given a prediction: the ones a user reads first (each costs two replays of the run).
constexpr size_t kWhatIfCauses = 5;

// The edit that removes a cause: its rank's stage as on the median rank; none for a cause of no single rank, or of a
// stage the replay does not run as time of its own (editable(): a wait, the collective, worker_start).
std::optional<ReplayEdit> edit_for(const StallCause& c) {
  if (c.rank < 0) return std::nullopt;
  ReplayEdit e;
  e.rank = c.rank;
  if (c.stage == "other") {
    e.other = true;
    return e;
  }
  const std::optional<Stage> s = stage_from_name(c.stage);
  if (!s || !editable(*s)) return std::nullopt;
  e.stage = *s;
  return e;
}

}  // namespace

void add_what_if(Analysis& a, const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                 const std::vector<HostCores>& hosts) {
  ReplayResult fit = replay(data, common);
  fit.holdout = replay_holdout(data, common);
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
  for (size_t i = 0; i < a.causes.size() && i < kWhatIfCauses; ++i) {
    std::optional<ReplayEdit> e = edit_for(a.causes[i]);
    if (e) e = edit_for_traces(*e, data);
    if (!e) continue;
    const ReplayResult r = replay(data, common, {*e}, false, hosts);
    if (r.ok) a.causes[i].what_if_step_ms = r.step_ms;
  }
}

}  // namespace ddp::analysis_detail
