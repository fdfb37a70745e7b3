#pragma once
// Stall analysis, the cores: whether a host had fewer cores than runnable threads, from where its spans' wall time
// went (traces/model/span_cpu.h). Processor sharing: N runnable threads on M < N cores each wait (N - M) / M for every
// unit of CPU work they do, so the waits per unit of CPU on a host (its stretch, c) say N = M (1 + c) runnable
// threads, the threads no span records included (a collective's own threads, BLAS pools, other processes), through
// the waits they cause. A saturated host's waits are the cores' doing, not a stage's: the attribution
// (analysis_attribution.cpp) charges the input waits a loader would not have with the cores it needs, and a
// collective's exposed time on a saturated host, to the cores, or to the {rank, stage} whose CPU above the other
// ranks' saturates them. docs/stalls.md, "The cores", is the specification.
// Internal to traces/analysis*.cpp.
#include <cstdint>
#include <vector>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/replay.h"  // HostCores

namespace ddp::analysis_detail {

// The hosts of `hosts` (the manifest's, traces/replay/contention.h) over the `steps` analysed steps, with their load
// and culprit; and each rank's waits for a core (RankAnalysis::cpu_wait_ms, LoaderStats::cpu_wait_ms_per_batch).
// `ranks[i]` measures `data[i]`. Hosts whose ranks recorded no split are left out.
std::vector<HostCpu> host_cpu(const std::vector<HostCores>& hosts, const std::vector<rank_data::RankData>& data,
                              std::vector<RankAnalysis>& ranks, double steps);

// The saturated host rank `rank` runs on, or nullptr.
const HostCpu* saturated_host_of(const std::vector<HostCpu>& hosts, int rank);

// Rank r's loader with the cores it needs: its supply (batch time less its waits for a core, over its workers)
// against compute's demand (also less the training thread's waits): the utilization it would have on enough cores.
double utilization_on_enough_cores(const RankAnalysis& r);

// One sentence for a saturated host: how many threads were runnable on how many cores, and what each ms of CPU
// work waited.
std::string saturation_text(const HostCpu& h);

}  // namespace ddp::analysis_detail
