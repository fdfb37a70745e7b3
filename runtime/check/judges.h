#pragma once
// The judges of the closed-loop checks, one per check, each a pure function of the evidence (evidence.h) so unit tests
// feed it planted faults without processes. Both subjects under check (our job, the user's script) are judged by
// these: a check's verdict and its wording exist once.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/check/check_result.h"
#include "runtime/check/evidence.h"
#include "traces/model/manifest.h"

namespace ddp {

// float32 defaults of torch.testing.assert_close: the tolerance of numerics.reference.
inline constexpr double kFloat32Rtol = 1.3e-6, kFloat32Atol = 1e-5;
// Beyond atol + rtol * |reference| per element, a share of the tensor's largest magnitude: a gradient is a sum over
// the batch, and the reference sums the union batch in one go where the ranks sum their halves, so float32 rounds
// the two differently, by up to ~sqrt(terms) x eps x the sum of the terms' magnitudes. Where the terms cancel (a
// first conv layer's weight gradient: 0.0136 at most, summed over 16 K positions) that is 1e-5 absolute and
// 0.07 % of the tensor's largest element (AMD EPYC, PyTorch 2.11's oneDNN on AVX2). 0.2 % keeps every planted
// mistake far outside (a sum-reduced loss is 100 %, BatchNorm without SyncBatchNorm several %).
inline constexpr double kTensorRtol = 2e-3;

// env.manifest: every field a reader needs to trust the run is present.
// `manifest` as the ladder read it; absent, `unread` says why (missing, not JSON, a field against records.def).
CheckResult check_manifest(const std::optional<Manifest>& manifest, const std::string& unread);

// data.shard_rule: in every pass of the training loader the ranks' indices partition the data, as far as their
// sampler's rule allows (judges_shard.cpp); without a DistributedSampler, the ranks' indices are disjoint.
CheckResult check_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, const ShardExpectation& e);
CheckResult judge_no_distributed_sampler(const std::vector<std::vector<ConsumedBatch>>& per_rank,
                                         const ShardExpectation& e);
CheckResult judge_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, const ShardExpectation& e);

// numerics.rank_sync: parameter hashes per step for every rank.
// numerics.rank_sync: everything meant to be replicated is equal across ranks at start and after each step
// (judges_rank_sync.cpp): the parameters' hashes and the companion's replicated state; the first difference, in
// step order, is named by its key.
CheckResult check_rank_sync(const std::vector<Replicas>& per_rank);
CheckResult check_rank_sync(const std::vector<std::map<int64_t, std::string>>& hashes_per_rank);

// numerics.reference: per parameter (forward order), each rank's synced gradient against the single-rank
// reference; per layer, the ranks' activations against the reference's.
TensorCompare compare_values(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref,
                             double rtol, double atol);
CheckResult judge_numerics(const std::vector<NumericsEvidence>& steps, int world, double rtol, double atol);
CheckResult judge_numerics_outcome(const NumericsOutcome& outcome);

// comm.no_sync: gradient accumulation communicates once per optimizer step, on its last micro-step (and, where the
// buckets are known, every bucket once with the parameters' bytes).
CheckResult judge_no_sync(const NoSyncEvidence& evidence);

// checkpoint.complete: what the file holds against what the live run holds.
CheckResult check_checkpoint_items(const std::vector<std::string>& expected, const std::vector<std::string>& found,
                                   const std::string& file);
CheckResult judge_checkpoint_complete(const CheckpointEvidence& evidence);

// checkpoint.resume: straight run against killed-and-resumed run, item by item.
CheckResult judge_resume(const ResumeEvidence& evidence);

// data.same_dataset: the items at the same indices agree across ranks.
CheckResult judge_same_dataset(const DatasetEvidence& evidence);

// train.learns: every parameter that requires grad is in a param_group, gets a non-zero gradient, and is changed by
// the optimizer step. numerics.finite: forward outputs and synced gradients finite at every step, the first
// non-finite step and layer named. train.mode: training forwards in train mode. train.schedule: the scheduler steps
// at most once per optimizer step.
CheckResult judge_learns(const TrainingEvidence& evidence);
CheckResult judge_finite(const TrainingEvidence& evidence);
CheckResult judge_mode(const TrainingEvidence& evidence);
CheckResult judge_schedule(const TrainingEvidence& evidence);

// train.iteration: one of each per iteration (judges_iteration.cpp): every optimizer step follows at least one
// training forward and its backward, finds its gradients zeroed since the last step, and runs after the backward.
CheckResult judge_iteration(const TrainingEvidence& evidence);

// memory.steady: after warm-up, a rank whose memory grows by traces/analysis/memory_growth.h's rule, one with the
// analysis' memory_growth flag, leaks; its marks and the measurements behind them are there (kLeakHeld,
// kLeakResident, kMemoryMinSteps).
// Ranks far apart: one rank's typical memory this many times another's, and at least this many bytes more.
inline constexpr double kRanksApartRatio = 1.5, kRanksApartBytes = 512e6;
CheckResult judge_memory(const TrainingEvidence& evidence);

// faults.exit: one supervised run per injected fault.
CheckResult judge_faults(const std::vector<FaultScenario>& scenarios);

}  // namespace ddp
