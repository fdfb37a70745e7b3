#pragma once
// The what-if of --analyze (traces/replay/replay.h): the replay's fit and, per top cause that is one rank's stage, the
// step predicted without it.
#include <vector>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/replay.h"

namespace ddp::analysis_detail {

using namespace rank_data;  // the analysis reads the ranks as traces/rank_data prepared them

// Fills a.replay and, for the first causes, StallCause::what_if_step_ms (the cause's stage on its rank set to the
// median rank's, step by step).
// `hosts`: the cores the ranks share (traces/replay/contention.h), for the replay's contention model.
void add_what_if(Analysis& a, const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                 const std::vector<HostCores>& hosts);

}  // namespace ddp::analysis_detail
