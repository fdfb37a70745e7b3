#pragma once
// Stall analysis, step 2: the per-rank, per-step measures (RankAnalysis: step time, time per stage, allreduce
// bandwidth/overlap/skew, loader supply and demand), and the lookups the later steps read them with.
// Internal to traces/analysis*.cpp.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"

namespace ddp::analysis_detail {

using namespace rank_data;  // the analysis reads the ranks as traces/rank_data prepared them

// The stage sets the analysis walks, from the stage table's kinds (traces/model/stages.def).
inline constexpr auto kLoaderStages = stages_with<kStageLoaderThread>();  // a loader worker's own work
inline constexpr auto kMainWork = stages_with<kStageDelaysCollective>();  // main-thread work a collective waits for

// The manifest's process-group backend ("gloo", "nccl"), empty when the run does not say.
std::string manifest_backend(const RunTrace& run);

// `job`: our own job's settings (RunTrace::job), null for a user's job or profiler traces (then what the spans show).
RankAnalysis rank_stats(const RankData& d, const std::vector<RankData>& all, int world, const records::job_config* job);

// Per-step time of a stage on a rank (0 when it has no spans of it).
double stage_ms(const RankAnalysis& r, Stage stage);
// Per-step main-thread time outside every main-thread span.
double untracked_ms(const RankAnalysis& r);
// Mean of `f` over the ranks other than `self` that have analysed steps (0 when there are none).
double peer_mean(const std::vector<RankAnalysis>& ra, int self, const std::function<double(const RankAnalysis&)>& f);
const RankAnalysis* find_rank(const std::vector<RankAnalysis>& ra, int rank);
// A loader stage's time per batch on a rank (0 when it has none).
double loader_ms_per_batch(const RankAnalysis& r, Stage stage);
// "N worker(s) supply a batch every X ms, compute needs one every Y ms[: K would keep up]".
std::string loader_supply_text(const LoaderStats& L);

}  // namespace ddp::analysis_detail
