#pragma once
// Stall analysis: per-rank, per-step breakdown of a recorded run and the attribution of every stall (wait_data,
// wait_comm, cross-rank skew) to the stage and rank that caused it. docs/stalls.md defines the rules and the JSON
// schema (a stable interface: `ddp_profile --analyze DIR --json`). analysis.cpp runs the steps in this folder (each
// file one step) and writes the verdict.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/analysis/analysis_types.h"
#include "traces/model/run_trace.h"

namespace ddp {

Analysis analyze(const RunTrace& run);
nlohmann::json analysis_json(const Analysis& a);
// The profiler's operators in rank `rank`'s untracked main-thread time, read by the caller from its trace `trace`
// over `steps` profiled steps (the analysis builds without the Kineto reader): the cause of that rank's untracked
// time names the largest in its sentence and lists them in its evidence ("operators"). Nothing when it has no such
// cause.
void name_untracked_operators(Analysis& a, int rank, const std::vector<UntrackedOperator>& ops, uint32_t steps,
                              const std::string& trace);
std::string analysis_text(const Analysis& a);

}  // namespace ddp
