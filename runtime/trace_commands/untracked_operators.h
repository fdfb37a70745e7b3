#pragma once
// --analyze's untracked main-thread time named by the profiler's operators in it: the glue between the analysis
// (traces/analysis, no Kineto reader) and the reader (traces/kineto/kineto_operators.h).
#include <string>
#include <vector>

#include "traces/analysis/analysis_types.h"
#include "traces/model/run_trace.h"

namespace ddp {

// For each rank with a cause in untracked time: its profiler trace (the one the importer read for it, or the run
// folder's rank<R>.pt.trace.json that a user's --record writes), read with the `--map` rules `maps`, names the
// operators in that cause. A rank without a trace, or one that does not read, keeps its cause as it was.
void name_untracked_time(const RunTrace& run, const std::vector<std::string>& maps, Analysis& a);

}  // namespace ddp
