#pragma once
// The cores' share in the replay: ranks on one host, and their loader workers, share its cores; a thread runnable
// while more threads are runnable than there are cores waits for one (the wait its spans recorded,
// traces/model/span_cpu.h). Processor sharing: with N runnable threads on M cores each unit of CPU work takes N/M of
// wall, so the host's waits per unit of CPU (its stretch, c) say N = M (1 + c) when N > M, counting the threads no
// span records (a collective's own threads, BLAS pools, other processes) through the waits they cause.
//
// An edit that removes runnable time (a CPU-bound straggler's extra work) lowers N by that time over the window, and
// every span on the host waits less: each op's and each fetch's wait becomes its CPU time times the new stretch. An
// edit that removes blocked time (a sleep, I/O) leaves N as it was. Whatever an edit does, a host cannot give its ranks
// more CPU than its cores: a predicted step shorter than the host's CPU work a step over its cores is raised to that,
// and said (`saturated`), instead of a speed-up the cores cannot give.
#include <string>
#include <vector>

#include "traces/model/run_trace.h"
#include "traces/replay/replay_graph.h"

namespace ddp {

// The hosts of `run` as its manifest says them (each rank's host and cpu_budget); ranks without a budget are on no
// host (their spans stay as measured). `data` is the run's prepared ranks, in the replay's order.
std::vector<HostCores> host_cores(const RunTrace& run, const std::vector<rank_data::RankData>& data);

namespace replay_graph {

// A host's load over the replayed window, measured.
struct HostLoad {
  double cores = 0;
  double cpu_ns = 0, wait_ns = 0;  // over the spans with a split
  double window_ns = 0;            // the replayed steps' wall time (the slowest rank's)
  double steps = 0;
  double stretch() const { return cpu_ns > 0 ? wait_ns / cpu_ns : 0; }
  // Runnable threads on average: the cores times (1 + stretch) when they waited, else the work the spans show.
  double runnable() const;
};
// `measured`: the plan of `cs` as measured (measured_plan). Each rank's ops are read as they stream (OpStream).
HostLoad measured_load(const HostCores& h, const std::vector<Chain>& cs, const Plan& measured);

// `edited` (a plan of `edited_chains`, the run's chains as the edits made them) with every op's and fetch's wait for a
// core as the host's load after the edits makes it (`measured`: each host's load as measured_load says it): a fetch's
// in Plan::fetch, an op's through Plan::rewait as the run reads it (planned_dur). Returns the stretch each host ends
// at. `cores`: each host's cores as an edit sets them (cores=N), 0 for its own.
std::vector<double> apply_contention(Plan& edited, const std::vector<Chain>& edited_chains,
                                     const std::vector<HostLoad>& measured, const std::vector<HostCores>& hosts,
                                     double cores);

// The least step the host's cores allow for plan `p` of `cs`: its CPU work a step over its cores, ns (0: no CPU
// recorded); `steps` the steps a rank replays.
double cpu_bound_step_ns(const HostCores& h, const Plan& p, const std::vector<Chain>& cs, double steps, double cores);

}  // namespace replay_graph
}  // namespace ddp
