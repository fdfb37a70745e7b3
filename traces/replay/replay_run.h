#pragma once
// The replay's run (replay.h) and what it leaves: replay_run.cpp runs the chains in lock step at the collectives,
// replay_predicted.cpp writes the replayed run as traces when asked. Internal to traces/replay.
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "traces/model/rank_trace.h"
#include "traces/replay/replay_graph.h"

namespace ddp::replay_graph {

// What a run of the chains gives: per step and per stage, and per batch and bucket (never per op: a predicted run's
// ops go to its traces as they run, PredictedRun).
struct Timeline {
  std::vector<std::map<uint32_t, std::pair<int64_t, int64_t>>> steps;  // per rank: step -> replayed begin, end
  std::array<double, 257> stage_ns{};  // replayed time inside steps per stage (index 256: untracked), all ranks
  size_t forced = 0;                   // waits passed as measured because no rank could move (a trace cut short)
  // Per rank, replayed [begin, end]: of each batch's fetch, of each launch's bucket (launch to done).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> fetches, buckets;
};

// The replayed run as one trace per rank on rank 0's clock (ReplayResult::predicted): its main-thread ops as spans of
// their stages as the run passes them, each step, then each bucket's allreduce (launch to done) on "comm" and each
// batch's fetch on its worker's lane (its measured stages in order, scaled to the predicted fetch).
class PredictedRun {
 public:
  PredictedRun(const std::vector<RankData>& data, int world);
  // Op `o` of rank `r` ran over [a, b]; each rank's ops come in their order.
  void op(size_t r, const Op& o, int64_t a, int64_t b);
  // The buckets and batches of the finished run `tl`, and the traces sorted by time.
  std::vector<RankTrace> finish(const std::vector<Chain>& chains, const Plan& p, const Timeline& tl);

 private:
  std::vector<RankTrace> traces_;
  std::vector<int64_t> step_begin_;  // per rank: the replayed start of the step it is in
};

// The chains run with plan `p`; with `predicted`, each op as it runs handed to it.
Timeline run_chains(const std::vector<Chain>& chains, const Plan& p, PredictedRun* predicted = nullptr);

}  // namespace ddp::replay_graph
