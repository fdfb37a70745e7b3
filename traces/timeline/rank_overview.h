#pragma once
// The viewer's overview of every rank at once (docs/viewer.md, "All ranks at once"): a grid of ranks x steps whose
// cell says how long the rank was busy in that step with anything but waiting for its peers, against the median rank
// of the step. In data-parallel training every rank's step lasts as long as the slowest one's (the gradient
// allreduce waits for it), so step time cannot show a straggler; the time a rank did not spend in wait_comm can: the
// slow rank spends the step working (or waiting for its own input), the others wait for it. A score of 2 is a rank
// twice as busy as the median rank in that step. Each cell also names its dominant main-thread stage.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "traces/timeline/timeline.h"

namespace ddp {

struct OverviewCell {
  bool present = false;         // the rank has this step
  float score = 0;              // own_ns / the median own_ns of the step over the ranks that have it
  uint8_t dominant = kNoStage;  // the main-thread stage with the most time in the step (waits included)
  int64_t step_ns = 0;          // the step's length on this rank
  int64_t own_ns = 0;           // step_ns less its wait_comm
};

struct RankOverview {
  std::vector<int> ranks;                 // each column's rank (processes without one: -1 - process index)
  std::vector<size_t> process;            // each column's first process in Timeline::processes (the scroll target)
  std::vector<uint32_t> steps;            // each row's step id, ascending
  std::vector<int64_t> step_t0, step_t1;  // each step's extent over every rank
  std::vector<OverviewCell> cells;        // steps.size() x ranks.size(), a row per step
  const OverviewCell& at(size_t step_row, size_t rank_col) const { return cells[step_row * ranks.size() + rank_col]; }
  bool empty() const { return ranks.empty() || steps.empty(); }
};

// One pass over every staged span of `tl`. Processes of one rank (a Kineto trace's CPU and GPU processes) are one
// column; processes without steps only add their spans to their rank's steps.
RankOverview build_rank_overview(const Timeline& tl);

}  // namespace ddp
