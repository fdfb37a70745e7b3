// The replay's trust rule (replay_trust.h).
#include "traces/replay/replay_trust.h"

#include "traces/base/text_format.h"

namespace ddp {

bool trusted(const ReplayResult& r) { return r.ok && r.notes.empty() && r.error_mean <= kReplayTrustedError; }

std::string notes_line(const ReplayResult& r) {
  std::string all;
  for (const std::string& n : r.notes) all += (all.empty() ? "" : "; ") + n;
  return all;
}

std::string distrust_reason(const ReplayResult& r) {
  if (!r.ok) return r.error;
  if (!r.notes.empty()) return notes_line(r);
  if (r.error_mean <= kReplayTrustedError) return {};
  return fmt(
      "the replay misses the measured steps by %.1f%% on average (more than %.0f%%): what it leaves out (CPU "
      "contention between ranks, the loader's back-pressure, memory bandwidth) weighs on this run",
      100 * r.error_mean, 100 * kReplayTrustedError);
}

}  // namespace ddp
