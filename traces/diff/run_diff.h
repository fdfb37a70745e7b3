#pragma once
// Run diff (`ddp_profile --diff A B`): what changed between two run folders and where they first diverge.
//   1. manifest/config differences, with a warning when more than one distributed variable changed;
//   2. the step-time breakdown per stage, side by side with deltas (from the rank traces, else the manifest);
//   3. the first step/kind/layer where the per-layer tensor summaries (verify/rank<R>.summaries.jsonl) diverge
//      beyond a relative tolerance, and the first step where the parameter hashes (verify/rank<R>.replicas.jsonl)
//      differ.
// No LibTorch: everything is read from the folder's files. The JSON shape is documented in docs/diff.md.
// run_diff.cpp runs the steps in this folder, one file each.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "traces/diff/run_diff_types.h"

namespace ddp {

// Reads a run folder. Returns false with `error` set when the folder is not a readable directory or holds nothing to
// compare (no valid manifest, no readable trace, no tensor summaries); partial damage goes to `problems`.
bool load_diff_run(const std::string& dir, DiffRun& run, std::string& error);
// A run already read (per-rank PyTorch profiler traces, load_kineto_run): its step breakdown, and a manifest of what
// the traces say of the job (world size, backend, which profiling cycle and steps), to compare as a run folder's.
DiffRun diff_run_of_traces(const RunTrace& run, int cycle);

// Flattens a manifest into dot-separated keys -> leaf values, leaving out what differs between any two runs
// (times, pids, clock offsets, per-rank outcomes). Arrays are leaves.
std::map<std::string, nlohmann::json> flatten_manifest(const nlohmann::json& manifest);

RunDiff diff_runs(const DiffRun& a, const DiffRun& b, const DiffOptions& opt = {});
nlohmann::json run_diff_json(const RunDiff& d);
std::string run_diff_text(const RunDiff& d);

}  // namespace ddp
