#pragma once
// Stall analysis, step 4: flags, conditions worth fixing even when they are not (yet) the top stall
// (docs/stalls.md, "Flags"; thresholds in traces/analysis/analysis_thresholds.h). Internal to traces/analysis*.cpp.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"

namespace ddp::analysis_detail {

using namespace rank_data;  // the analysis reads the ranks as traces/rank_data prepared them

// Appends the flags of every rank to a.flags, rank by rank, then those of the run as a whole; `a.ranks[i]` measures
// `data[i]`. `backend` is the manifest's ("gloo", "nccl"; empty when unknown), for the advice a flag gives.
// `job`: our own job's settings (null for a user's job or profiler traces).
void add_flags(Analysis& a, const std::vector<RankData>& data, const records::job_config* job,
               const std::string& backend);

}  // namespace ddp::analysis_detail
