#pragma once
// The cores this process could run on and the threads it asked for (records.def's cpu_budget): its affinity, the
// host's online cores, a cgroup's CPU limit (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us) and the
// OMP/MKL variables. The analysis weighs the spans' waits for a core against it.
#include <optional>
#include <string>

#include "traces/model/records.h"

namespace ddp {

// `intra_op_threads`: the process's compute pool (at::get_num_threads); `loader_workers`: its loader's threads.
records::cpu_budget this_process_cpu_budget(int intra_op_threads, std::optional<int> loader_workers);

// A cgroup's CPU limit in cores (quota / period) from its cpu.max text ("max 100000" is none, "150000 100000" 1.5).
std::optional<double> cgroup_cores_of(const std::string& cpu_max);

}  // namespace ddp
