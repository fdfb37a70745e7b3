#pragma once
// One Kineto file's stage spans into the RankTrace model our own runs use: one collective source kept, nested
// matches of a stage on a thread counted once, every span given the step of the ProfilerStep window it falls in,
// the main thread's wait for its collectives made explicit (wait_comm), threads as lanes. docs/kineto.md says why
// each rule is what it is. Internal to traces/kineto_*.cpp.
#include <string>
#include <vector>

#include "traces/kineto/kineto_align.h"
#include "traces/kineto/kineto_file.h"
#include "traces/model/rank_trace.h"

namespace ddp::kineto_detail {

struct BuiltRank {
  RankTrace trace;                        // on the rank's own clock; clocks are set by the caller after alignment
  std::vector<CollectiveAnchor> anchors;  // its collectives, for the clock alignment
  std::vector<std::string> notes;         // what was left out or derived, one line each
};

BuiltRank build_rank(const KFile& f, int world);

}  // namespace ddp::kineto_detail
