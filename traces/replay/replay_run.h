#pragma once
// The replay's run (replay.h): a plan's chains advanced in lock step at the collectives. replay.cpp runs the measured
// and the edited plan with it, replay_holdout.cpp the plan fitted on half of the steps.
#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "traces/replay/replay_graph.h"

namespace ddp::replay_graph {

// What a run of the chains replayed: each rank's steps, ops, fetches and buckets, and the time per stage.
struct Timeline {
  std::vector<std::map<uint32_t, std::pair<int64_t, int64_t>>> steps;  // per rank: step -> replayed begin, end
  std::array<double, 257> stage_ns{};  // replayed time inside steps per stage (index 256: untracked), all ranks
  size_t forced = 0;                   // waits passed as measured because no rank could move (a trace cut short)
  // Per rank, replayed [begin, end]: of each op, of each batch's fetch, of each launch's bucket (launch to done).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ops, fetches, buckets;
};

// The chains run with the plan's durations, fetches and transfers: the replayed timeline.
Timeline run(const std::vector<Chain>& chains, const Plan& p);

}  // namespace ddp::replay_graph
