#pragma once
// The batches a rank's loader made, each as it was fetched, and how deep its queue ran: what the replay schedules
// (traces/replay/replay_graph.h) and the burst rule (traces/analysis/loader_burst.h) both read.
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traces/rank_data/rank_data.h"

namespace ddp::rank_data {

// One batch's fetch, on the lane that spent the most on it: a user's pin thread pins it too, and that is part of the
// hand-over, not of the fetch.
struct Fetch {
  uint8_t lane = 0;                 // the lane that fetched it
  int64_t start = 0, end = 0;       // its first span's start, last span's end on that lane
  uint16_t pass = 0;                // the loader's pass (epoch) it belongs to
  std::map<Stage, int64_t> stages;  // its time per loader stage
  int64_t cpu = -1, wait = -1;      // its spans' time on a CPU and waiting for a core; -1: a span without a split
  // Its time on its lane, all stages.
  int64_t spent() const {
    int64_t t = 0;
    for (const auto& [stage, ns] : stages) t += ns;
    return t;
  }
};

// `d`'s batches by sync_key(step, micro) of the step that consumed them, every step (not only the analysed).
std::unordered_map<uint64_t, Fetch> fetched_batches(const RankData& d);

// The deepest the queue ran: per batch in the order the training thread took them (its fetch's start, the moment it
// was taken), the batches taken later than its fetch began, plus itself; the most of those.
int64_t queue_depth_seen(const std::vector<std::pair<int64_t, int64_t>>& start_take);

}  // namespace ddp::rank_data
