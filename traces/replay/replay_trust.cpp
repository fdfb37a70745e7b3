// The replay's trust rule (replay_trust.h).
#include "traces/replay/replay_trust.h"

#include "traces/base/text_format.h"

namespace ddp {

bool trusted(const ReplayResult& r) {
  return r.ok && r.notes.empty() && r.holdout.ok && r.holdout.mean_step_error <= kReplayTrustedError;
}

std::string notes_line(const ReplayResult& r) {
  std::string all;
  for (const std::string& n : r.notes) all += (all.empty() ? "" : "; ") + n;
  return all;
}

std::string distrust_reason(const ReplayResult& r) {
  if (!r.ok) return r.error;
  if (!r.notes.empty()) return notes_line(r);
  if (!r.holdout.ok) return r.holdout.reason;
  if (r.holdout.mean_step_error <= kReplayTrustedError) return {};
  return fmt(
      "fitted on one half of the steps, the replay misses the other half's mean step by %.1f%% (more than %.0f%%): the "
      "run changes along its steps, or what the replay leaves out (CPU contention between ranks, the loader's "
      "back-pressure, memory bandwidth) weighs on it",
      100 * r.holdout.mean_step_error, 100 * kReplayTrustedError);
}

}  // namespace ddp
