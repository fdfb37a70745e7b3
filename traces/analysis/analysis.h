#pragma once
// Stall analysis: per-rank, per-step breakdown of a recorded run and the attribution of every stall (wait_data,
// wait_comm, cross-rank skew) to the stage and rank that caused it. docs/stalls.md defines the rules and the JSON
// schema (a stable interface: `ddp_profile --analyze DIR --json`). analysis.cpp runs the steps in this folder (each
// file one step) and writes the verdict.
#include <string>

#include <nlohmann/json.hpp>

#include "traces/analysis/analysis_types.h"
#include "traces/model/run_trace.h"

namespace ddp {

Analysis analyze(const RunTrace& run);
nlohmann::json analysis_json(const Analysis& a);
std::string analysis_text(const Analysis& a);

}  // namespace ddp
