#pragma once
// What if: the run's steps replayed from their measured pieces, and replayed again with one piece changed.
//
// Each rank's analysed steps become one chain of ops that covers its main thread without a gap: every top-level
// main-lane span is an op (its measured duration), the time between spans is an op of its own ("other"), and the
// two waits are not durations but conditions. wait_comm ends when every bucket of its sync is done, a bucket being
// done its measured transfer after the latest launch over all ranks, each launch replayed where it fell in its op
// (backward scaled, it moves with it). wait_data ends when the batch arrives: a wait that held the rank (longer than
// kReplayStallNs) is the loader's arrival time as measured, moved earlier only by an edit of the loader's own stages;
// a shorter one is a hand-over that costs its duration. The ranks advance in lock step: a rank blocked at a wait_comm
// waits for the others to reach theirs.
//
// Replayed as measured, the chains must give back the measured steps: the per-step error (mean and p90 of |replayed
// - measured| / measured step time, averaged over ranks) says how far to trust an edit. An edit sets one stage of one
// rank to what the median rank spent on it in each step.
//
// What it leaves out: the loader's back-pressure (a worker that waited for a free slot does not start earlier when
// the consumer speeds up), CPU contention between ranks on one machine, memory bandwidth, the allocator.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/analysis/analysis_rank_data.h"
#include "traces/analysis/analysis_thresholds.h"

namespace ddp::analysis_detail {

struct ReplayEdit {
  int rank = 0;  // the rank whose stage changes
  Stage stage = Stage::forward;
  bool other = false;  // the untracked time between spans instead of a stage
};

struct ReplayResult {
  double step_ms = 0;         // mean over the steps of the mean over ranks of the replayed step
  double measured_ms = 0;     // the same, measured
  double error_mean = 0;      // |replayed - measured| / measured, per step, mean (the unedited replay)
  double error_p90 = 0;       //   and 90th percentile
  std::vector<double> steps;  // replayed mean step per analysed step
  bool ok = false;            // false: nothing to replay (then `why`)
  std::string why;
};

// Replays the steps in `common` (every rank has them); with an edit, the edited replay (its error fields are the
// unedited replay's fit).
ReplayResult replay(const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                    const std::optional<ReplayEdit>& edit = std::nullopt);

}  // namespace ddp::analysis_detail
