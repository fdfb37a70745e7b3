#pragma once
// The cores each rank of a local launch runs on. Two unpinned ranks on a 2-core machine preempt each other's Gloo
// threads in the middle of a collective, for whole scheduler slices (perf sched showed 1-4 ms delays; the default
// job's step was 1.1-1.8 ms unpinned, 1.0 ms pinned). Each rank gets its own equal, contiguous share of the cores the
// supervisor may use, so its threads compete only with each other. torchrun and Slurm launches are the launcher's
// business (docs/quickstart.md says how to pin there).
#include <vector>

namespace ddp {

// The CPUs the calling process may run on, in order (sched_getaffinity); empty when that cannot be read.
std::vector<int> allowed_cpus();
// Splits `cpus` into `world` equal contiguous shares (the remainder unused). Empty when there are fewer CPUs than
// ranks, or one rank: then nothing is pinned.
std::vector<std::vector<int>> rank_cpu_sets(const std::vector<int>& cpus, int world);
// Restricts the calling process (and the threads it starts later) to `cpus`. False when the kernel refuses.
bool pin_process(const std::vector<int>& cpus);

}  // namespace ddp
