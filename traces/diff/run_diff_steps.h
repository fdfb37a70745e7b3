#pragma once
// The steps of the run diff (traces/run_diff.h), one file each: run_diff_load (read a run folder), run_diff_config
// (manifest differences), run_diff_timing (step-time breakdown), run_diff_tensors (first divergence of the tensor
// summaries), run_diff_replicas (parameter hashes), run_diff_report (JSON and text); run_diff.cpp runs them.
// Internal to traces/run_diff*.cpp.
#include <set>
#include <string>
#include <vector>

#include "traces/diff/run_diff.h"

namespace ddp::run_diff_detail {

// The manifest keys whose values differ, and the names of the distributed variables among them.
std::vector<ConfigDifference> diff_config(const nlohmann::json& manifest_a, const nlohmann::json& manifest_b,
                                          std::set<std::string>& changed_variables);
TimingDiff diff_timing(const DiffRun& a, const DiffRun& b);
TensorDiff diff_tensors(const DiffRun& a, const DiffRun& b, double rtol);
ReplicaDiff diff_replicas(const DiffRun& a, const DiffRun& b);

}  // namespace ddp::run_diff_detail
