#pragma once
// Every threshold of the stall analysis, in one place: the rules in docs/stalls.md name these constants. The values
// are judgement calls from runs of the default job; each comment says what the number protects against.
#include <cstddef>
#include <cstdint>

namespace ddp {

// ---- steps ----
// kWarmupMinSteps, the steps a rank needs before its first is skipped as warm-up, is in traces/rank_data/rank_data.h:
// the replay skips the same.

// ---- causes and verdict ----
// A cause at or above this share of step time is "dominant": it names the verdict. Below it, no single fix would
// buy back a tenth of the step, so the run is called compute bound.
inline constexpr double kDominantShare = 0.10;
// Causes below this share of step time are dropped: at 1 % they are within the jitter of a steady run.
inline constexpr double kMinCauseShare = 0.01;
// Every rank losing time to its own input by about as much (the least at least this share of the most) is one cause
// of every rank, not the first rank's: a close second would otherwise turn "every loader is slow" into "rank 0".
// A rank that waits a third more than another or worse (e.g. 4 ms against 2) is still that rank's cause.
inline constexpr double kSharedInputCauseRatio = 0.75;
// A loader stage is blamed for a rank's data waits for being above the other ranks' mean only when the excess is more
// than this share of its own time; a smaller excess is noise and the largest stage per batch is named instead.
inline constexpr double kLoaderCauseMinExcess = 0.2;
// ... and only when that excess is also at least this share of the rank's whole loader time per batch: a stage of a
// tenth of the batch 40% above the other ranks' is noise in what the batch costs. Measured on a balanced user run here
// (image folder, 2 workers per rank, 6 processes on 2 cores): collate 0.91 against 0.65 ms in a 7.9 ms batch (3%)
// was named; the planted 4 ms/image transform is 60% of its rank's batch.
inline constexpr double kLoaderCauseMinBatchShare = 0.1;
// A loader whose workers together make a batch in at most this share of the time compute takes to use one keeps up:
// its rank's waits for data are not any loader stage's, even one above the other ranks', and they are charged to
// wait_data itself, said as the batches arriving late (CPU shared with the training process, the hand-off from the
// workers). Measured on the balanced run above: utilization 0.39-0.46 with 2.6-3.1 ms/step of waits, and one rank's
// disk_read 3.60 against 2.53 ms (11% of its batch) from the cores' sharing alone; a planted slow stage or one worker
// too few shows utilization above 1.
inline constexpr double kLoaderKeepsUpUtilization = 0.8;

// ---- bursts (traces/analysis/loader_burst.h) ----
// A rank's waits for data are a burst's when the batches slower than the queue hides hold at least this share of
// them: most of the waiting is then those batches', and hiding them is the fix. Below it the waits are spread over
// ordinary batches (a loader short of rate, the hand-off) and the other rules name them.
inline constexpr double kBurstWaitShare = 0.5;
// ... and when there are at least this many slow batches in the analysed steps: one is a cold start or a one-off
// hiccup, not a pattern a deeper queue is worth buying for.
inline constexpr int kBurstMinSlowBatches = 2;
// ... and unless at least this share of the slow batches' extra time (over the typical batch) was their spans waiting
// for a core: then the cores made them slow (cpu_verdict.h), and a deeper queue on the same cores buys little. Half:
// whichever holds the larger part of the extra is its cause.
inline constexpr double kBurstCoresShare = 0.5;

// ---- the cores (traces/analysis/cpu_verdict.h) ----
// A host whose spans waited for a core at least this long per ms of CPU work is saturated: its runnable threads
// outnumber its cores by that share (processor sharing), and its waits are the cores' before they are any stage's.
// Half again as many runnable threads as cores. Measured on 2 cores (docs/stalls.md, "The cores"): a user's image
// folder job with 2 workers a rank 0.65-0.95, with 4 workers 2.30; no workers 0.02, one worker on slow storage 0.11,
// one busy worker 0.28; our default job 0.26: busy hosts whose waits are still the stages'.
inline constexpr double kCpuSaturatedStretch = 0.5;
// On a saturated host, the {rank, stage} whose CPU a step is above the other ranks' mean by at least this share of the
// host's CPU a step is what the cores are short of: the waits the saturation causes are charged to it.
// Measured: a planted 4 ms/image busy transform on one rank is 28 ms/step above the other's of the host's 60; the
// ranks of a balanced run differ by at most 2 of 30 in any stage.
inline constexpr double kContentionCulpritShare = 0.25;
// On a saturated host, a loader that would supply its batches at least as fast as compute uses them once neither waits
// for a core (utilization_on_enough_cores below this) is not what is slow: its rank's data waits are the cores'.
// Not a margin but the break-even itself: the waits for a core are what takes it over. Measured on the balanced run
// (2 workers a rank, stretch 0.95): 0.93 and 1.03 as recorded, 0.70 and 0.81 on enough cores.
inline constexpr double kLoaderKeepsUpOnEnoughCores = 1.0;

// ---- flag pageable_h2d (without a `pinned` setting in the manifest) ----
// Pinned host-to-device copies run well above this bandwidth on any PCIe generation in use; pageable copies, staged
// through a driver buffer, fall below it.
inline constexpr double kPageableH2dMaxGbps = 3.0;
// A slow copy only matters when it costs at least this share of the step; tiny copies never reach full bandwidth.
inline constexpr double kPageableH2dMinShare = 0.02;

// ---- flag tiny_buckets ----
// More allreduces than this per sync means per-call latency is paid many times over, whatever the bucket size.
inline constexpr double kTinyBucketsMaxPerSync = 8;
// From this many allreduces per sync, buckets averaging under kTinyBucketMaxMiB are latency bound.
inline constexpr double kTinyBucketsMinPerSync = 3;
// Under 1 MiB a collective's fixed latency dominates its transfer time on common interconnects.
inline constexpr double kTinyBucketMaxMiB = 1.0;

// ---- flag loader_cannot_keep_up ----
// Compute waiting for input this share of the step or more is a loader problem on its own.
inline constexpr double kLoaderWaitShare = 0.05;
// From this smaller share of waiting, the loader is flagged when a second sign agrees (utilization or empty queue).
inline constexpr double kLoaderWaitMinShare = 0.01;
// Loader utilization (supply time / demand time per batch) above this means it delivers slower than compute asks.
inline constexpr double kLoaderMaxUtilization = 1.0;
// The loader queue found empty in at least this share of its samples: compute drains it faster than it fills.
inline constexpr double kLoaderQueueEmptyFraction = 0.5;

// ---- flag memory_growth ----
// Its rule and marks (kMemoryMinSamples, kMemoryWarmupParts, kMemoryMinSamplesAfterWarmup, kCounterGrowth) are in
// traces/analysis/memory_growth.h, one rule with the check memory.steady's.

// ---- flag collective_tail ----
// A collective's own time is measured from the last rank's launch to the first rank's completion, when every rank
// has launched and nobody waits for a peer. Fewer matched collectives than this cannot show a tail.
inline constexpr size_t kCollectiveTailMinCollectives = 20;
// The tail fires when the p90 of that time is at least this many times its median ...
inline constexpr double kCollectiveTailP90OverMedian = 3.0;
// ... and at least this much above it: a scheduler slice (~3 ms) or a network retransmit, not jitter.
inline constexpr double kCollectiveTailMinExcessMs = 1.0;
// ... and the time above the median, per step, is at least this share of the step.
inline constexpr double kCollectiveTailMinShare = 0.05;

// ---- GPU time (traces/analysis/gpu_time.h) ----
// A gap between two queued records on one stream up to this long is the device's own launch overhead ("kernel
// wait"), not a dependency: back-to-back kernels on current GPUs sit a few microseconds apart.
inline constexpr int64_t kKernelWaitMaxGapNs = 30'000;

// ---- the text report at scale (analysis_report_scale.cpp) ----
// Above kRanksListedInFull (traces/base/rank_set.h) the report groups causes and flags by pattern, with compact rank
// sets, and summarises the ranks (distribution and the worst few): it grows with what is wrong, not with the world.
inline constexpr size_t kCauseGroupsShown = 8;
inline constexpr size_t kFlagGroupsShown = 8;
inline constexpr size_t kStragglersShown = 8;
inline constexpr size_t kProblemsShown = 6;

// The what-if replay's thresholds (kReplayStallNs, kReplayTrustedError, kReplayPrefetch) are the replay's own:
// traces/replay/replay_thresholds.h.

}  // namespace ddp
