#pragma once
// Stall analysis, step 3: cross-rank root cause. Every stall instance (a wait_data or wait_comm span in the steps
// every rank analysed) is split into pieces charged to causes (rank, stage); the pieces are summed into StallCauses,
// ranked by the job time they cost. docs/stalls.md, "Attribution rules", is the specification.
// Internal to traces/analysis*.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"

namespace ddp::analysis_detail {

using namespace rank_data;  // the analysis reads the ranks as traces/rank_data prepared them

// The stage a cause is charged to; nullopt is `other`, main-thread time outside every span.
using CauseStage = std::optional<Stage>;
inline std::string cause_stage_name(const CauseStage& s) { return s ? sname(*s) : std::string("other"); }

// `ranks[i]` measures `data[i]`; `common` are the steps every rank analysed; `step_ms` the mean step over ranks;
// `origin_ns` the run's time origin (StallCause::at_ns is relative to it). Causes under kMinCauseShare are dropped.
std::vector<StallCause> attribute_stalls(const std::vector<RankData>& data, const std::vector<RankAnalysis>& ranks,
                                         const std::vector<uint32_t>& common, double step_ms, int64_t origin_ns);

// Fills a cause's evidence and explanation from the per-rank measures.
void explain(StallCause& c, const CauseStage& stage, const std::vector<RankAnalysis>& ranks);

}  // namespace ddp::analysis_detail
