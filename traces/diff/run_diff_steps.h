#pragma once
// The steps of the run diff (traces/diff/run_diff.h runs them), internal to this folder.
#include <set>
#include <string>
#include <vector>

#include "traces/diff/run_diff_types.h"

namespace ddp::run_diff_detail {

// The manifest keys whose values differ, and the names of the distributed variables among them.
std::vector<ConfigDifference> diff_config(const nlohmann::json& manifest_a, const nlohmann::json& manifest_b,
                                          std::set<std::string>& changed_variables);
TimingDiff diff_timing(const DiffRun& a, const DiffRun& b);
TensorDiff diff_tensors(const DiffRun& a, const DiffRun& b, double rtol);
ReplicaDiff diff_replicas(const DiffRun& a, const DiffRun& b);

}  // namespace ddp::run_diff_detail
