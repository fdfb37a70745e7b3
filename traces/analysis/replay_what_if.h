#pragma once
// The what-if of --analyze (replay.h): the replay's fit and, per top cause that is one rank's stage, the step
// predicted without it.
#include <vector>

#include "traces/analysis/analysis_rank_data.h"
#include "traces/analysis/analysis_types.h"

namespace ddp::analysis_detail {

// Fills a.replay and, for the first causes, StallCause::what_if_step_ms (the cause's stage on its rank set to the
// median rank's, step by step).
void add_what_if(Analysis& a, const std::vector<RankData>& data, const std::vector<uint32_t>& common);

}  // namespace ddp::analysis_detail
