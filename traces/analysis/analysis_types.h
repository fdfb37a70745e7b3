#pragma once
// What the stall analysis finds (traces/analysis/analysis.h computes it): victims, root causes, flags and the per-rank
// measures. The analysis' steps include this, not the entry points.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/analysis/analysis_thresholds.h"  // kDominantShare, kMinCauseShare and the flag thresholds
#include "traces/analysis/gpu_time.h"
#include "traces/model/run_folder.h"

namespace ddp {

// Where a stall showed: the victim rank and the waiting stage (wait_data, wait_comm).
struct StallVictim {
  int rank = 0;
  std::string stage;
  double ms = 0;  // total over the analysed steps
};

// One root cause: the stage on a rank that made others (or itself) wait.
// The stage name of a cause in a rank's untracked main-thread time (time between its spans).
inline constexpr const char* kUntrackedCauseName = "other";

struct StallCause {
  int rank = 0;        // the rank at fault; -1 = no single rank (the collective's transfer, input all share)
  std::string stage;   // a stage name from traces/model/stages.h, or kUntrackedCauseName (untracked main-thread time)
  double lost_ms = 0;  // job wall time lost over the analysed steps (per step: max over victims)
  double lost_ms_per_step = 0;  // lost_ms / analysed steps
  double share = 0;             // lost_ms_per_step / mean step time
  std::vector<StallVictim> victims;
  nlohmann::json evidence;  // numbers that support the attribution (object)
  std::string explanation;  // one readable sentence
  int64_t at_ns = 0;        // start of the worst instance's wait span, common clock, relative to RunTrace::origin_ns()
  int at_rank = 0;          // the rank where that wait span is
  uint32_t at_step = 0;     // the step of the worst instance
  // The mean step predicted without it (traces/replay/replay.h: the rank's stage as on the median rank; the cores'
  // cause: on the cores every saturated host needs); -1 when no single rank's stage is the cause (the collective, an
  // input all ranks share) or nothing could be replayed.
  double what_if_step_ms = -1;
};

// How well the replay predicts the steps it did not fit (traces/replay/replay_holdout.h), and how well its graph of the
// run gives back the measured steps (traces/replay/replay.h).
struct ReplayFit {
  bool ok = false;                     // false: nothing replayable (then `error`)
  std::string error;                   // why not ok
  double step_error_mean = 0;          // the fit: |replayed - measured| / measured step, mean over the analysed steps
  double step_error_p90 = 0;           //   its 90th percentile
  double replayed_step_ms = 0;         // mean replayed step
  bool holdout_ok = false;             // false: too few steps to hold half out (untrusted_reason says so)
  double holdout_error_mean = 0;       // |predicted - measured| / measured step of the steps it did not fit, mean
  double holdout_error_p90 = 0;        //   its 90th percentile
  double holdout_mean_step_error = 0;  // |predicted - measured| / measured mean step of a half, the larger half's
  size_t holdout_steps = 0;            // the steps predicted so
  bool trusted = false;                // traces/replay/replay_trust.h's rule, --what-if's too
  std::string untrusted_reason;  // with ok and not trusted: why (its notes, too few steps, or the held-out mean step)
};

struct StallFlag {
  std::string id;  // pageable_h2d, sync_every_micro_step, tiny_buckets, loader_cannot_keep_up, memory_growth, ...
  int rank = 0;
  std::string message;
  nlohmann::json evidence;
};

struct AllreduceStats {
  double count_per_step = 0;  // bucket allreduces per optimizer step
  double syncs_per_step = 0;  // distinct (step, micro) with allreduces, per step
  double bytes_per_step = 0;
  double mean_bucket_bytes = 0;
  double time_ms_per_step = 0;  // transfer time: union of bucket spans, each from the later launch of all ranks
  double algbw_gbps = 0;        // bytes / transfer time (1 GB = 1e9 bytes)
  double busbw_gbps = 0;        // algbw * 2(n-1)/n
  // False when the trace carries no message sizes (a PyTorch profiler trace recorded without record_shapes=True):
  // then bytes and bandwidths are unknown — null in JSON, said in text — not zero.
  bool sizes_known = true;
};

// Batches whose fetch outlasted what the queue hides, when they hold the rank's waits (loader_burst.h).
struct LoaderBurst {
  int batches = 0;                 // analysed batches with a fetch on a lane
  int slow_batches = 0;            // of them, fetched in more than queue_lead_ms
  int depth = 0;                   // batches in flight, as the run showed (at least 1)
  double queue_lead_ms = 0;        // depth x demand: the fetch time the queue hides
  double typical_fetch_ms = 0;     // median fetch of every batch
  double slow_fetch_ms = 0;        // median fetch of the slow ones
  double wait_share = 0;           // share of the rank's waits for data spent on slow batches
  double slow_cpu_wait_ms = 0;     // of a slow batch's extra time (over typical), waiting for a core; -1 unknown
  Stage stage = Stage::disk_read;  // the loader stage the slow batches spend their extra time in
  int prefetch_to_hide = 0;        // batches in flight per worker that would hide a slow fetch
  int workers_to_hide = 0;         // or workers at the run's prefetch
  bool found = false;              // the rules of loader_burst.h hold: the rank's waits are this burst's
};

struct LoaderStats {
  int workers = 0;
  double batches = 0;                                // batches the analysed steps consumed
  std::map<std::string, double> ms_per_batch;        // disk_read, transform, pin: mean per batch
  double batch_ms = 0;                               // sum of the above: one worker's time for one batch
  double supply_ms_per_batch = 0;                    // batch_ms / workers: the loader's best rate
  double demand_ms_per_batch = 0;                    // main-thread time per micro-step excluding wait_data
  double utilization = 0;                            // supply / demand; > 1 means the loader cannot keep up
  int workers_needed = 0;                            // ceil(batch_ms / demand): the workers that would keep up
  double queue_empty_fraction = -1;                  // share of loader_queue_depth samples at 0; -1 when not recorded
  int worker_starts = 0;                             // worker processes started (worker_start spans), in any step
  int passes_starting_workers = 0;                   // loader passes that started workers (1: persistent workers)
  double worker_start_ms = 0;                        // mean start-up of one worker, worker_init_fn included
  double start_wait_ms = 0;                          // per analysed step: waits for data while workers were starting
  std::map<std::string, double> transform_steps_ms;  // a Compose's steps by class, whole run (a user's job)
  double cpu_wait_ms_per_batch = 0;  // of batch_ms: its workers runnable, waiting for a core (cpu_verdict.h)
  LoaderBurst burst;
};

struct RankAnalysis {
  int rank = 0;
  uint64_t steps = 0;  // analysed steps (the first step is skipped as warm-up when there are 3 or more)
  double step_ms = 0;  // mean step span
  std::map<std::string, double> stages_ms_per_step;  // every span stage (loader stages: summed worker time)
  double wait_data_ms = 0;                           // per step
  double wait_comm_ms = 0;                           // per step
  double micro_steps = 0;                            // forward passes per step
  double overlap_pct = 0;  // share of allreduce time under forward/backward on the main lane, 0..100
  AllreduceStats allreduce;
  double skew_ms = 0;  // per step: time in allreduce before the last peer launched the same bucket
  double h2d_gbps = 0;
  LoaderStats loader;
  double cpu_wait_ms = 0;  // per step: the training thread's spans runnable, waiting for a core (cpu_verdict.h)
  bool complete = true;
  uint64_t dropped = 0;
};

// One host's cores against its ranks' threads over the analysed steps (traces/analysis/cpu_verdict.h): from the
// spans' CPU splits (traces/model/span_cpu.h) and the manifest's cpu budget of each rank.
struct HostCpu {
  std::string host;
  std::vector<int> ranks;
  double cores = 0;             // what its ranks could run on (affinity, cgroup limit, online cores)
  double cpu_ms_per_step = 0;   // its spans' time on a CPU, all its ranks' threads, a step
  double wait_ms_per_step = 0;  // their time runnable, waiting for a core
  double stretch = 0;           // wait / cpu: what processor sharing adds to each ms of CPU work
  double runnable = 0;          // threads runnable on average: cores (1 + stretch) when they waited
  bool saturated = false;       // stretch at or above kCpuSaturatedStretch
  // The {rank, stage} whose CPU above the other ranks' saturates the host (kContentionCulpritShare); rank -1: none.
  int culprit_rank = -1;
  std::string culprit_stage;
  double culprit_excess_ms_per_step = 0;
};

// One profiler operator in a rank's untracked main-thread time (traces/kineto/kineto_operators.h reads them from the
// rank's trace; name_untracked_operators in analysis.h gives them to that rank's cause).
struct UntrackedOperator {
  std::string name;
  double ms_per_step = 0;     // its own time there, per profiled step
  double calls_per_step = 0;  // calls that took some of it, per profiled step
};

struct Analysis {
  int world = 0;
  uint64_t steps = 0;  // steps analysed in common across ranks
  uint64_t warmup_steps = 0;
  double step_ms = 0;              // mean over ranks of the mean step time
  std::vector<StallCause> causes;  // sorted by lost_ms, descending
  ReplayFit replay;
  std::vector<StallFlag> flags;
  std::vector<RankAnalysis> ranks;
  std::vector<GpuTime> gpu;  // ranks with GPU activity records (traces/analysis/gpu_time.h)
  std::vector<HostCpu> cpu;  // hosts whose ranks recorded CPU splits and said their cores
  std::string verdict;
  std::vector<std::string> problems;  // damaged or missing input, from the run and from the analysis
};

}  // namespace ddp
