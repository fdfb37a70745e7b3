#pragma once
// What a check is judged on, as plain data: each subject under check (our job, the user's script) gathers it its own
// way (runtime/check/subject.h) and the one judge of the check decides (judges.h). Also the readers of the
// verification logs both subjects write in the same layout (verify/rank<R>.<kind>.jsonl, traces/model/run_folder.h),
// each line a record of traces/model/records.def read strictly: a log that breaks the contract is an error naming the
// file, the line and the field, never a default.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/run_outcome.h"
#include "traces/model/records.h"
#include "traces/model/run_trace.h"

namespace ddp {

// --- data.shard_rule ---------------------------------------------------------------------------------------------
// One consumed micro-batch, as logged by a rank (verify/rank<R>.samples.jsonl).
struct ConsumedBatch {
  int epoch = 0;
  int64_t step = 0;
  int micro = 0;
  int64_t batch = 0;
  std::vector<int64_t> indices;
  std::optional<int64_t> sampler_epoch = std::nullopt;  // the sampler's own epoch (set_epoch) where it has one
};
// Every batch a rank logged; empty with `error` when the log is missing or has a damaged line.
std::vector<ConsumedBatch> read_consumed(const std::string& run_dir, int rank, std::string& error);

// What a rank's sampler said of itself (the companion's meta); absent where it has no such setting.
struct SamplerConfig {
  std::optional<int64_t> seed, num_replicas, rank;
};

// What the sampler should have handed each rank.
struct ShardExpectation {
  bool distributed = true;    // false: the loader has no DistributedSampler (every rank reads everything)
  std::string sampler_class;  // what it has instead
  int64_t dataset_size = 0;
  bool shuffle = true;
  std::function<std::vector<int64_t>(int epoch, int rank)> expected;  // the rule's indices, in order
  std::vector<SamplerConfig> per_rank;  // each rank's own sampler, where known: what names a broken partition
};

// --- numerics.rank_sync --------------------------------------------------------------------------------------------
// What one rank logged as replicated, per step (step -1 = after the initial broadcast): its parameters' hash and,
// from the companion, the rest of what DDP keeps equal ([key, value], python/ddp_profile/replicated.py).
using StatePairs = std::vector<std::pair<std::string, std::string>>;
struct Replicas {
  std::map<int64_t, std::string> param_hash;
  std::map<int64_t, StatePairs> state;
};
// Empty with `error` when unreadable.
Replicas read_replicas(const std::string& run_dir, int rank, std::string& error);
std::map<int64_t, std::string> read_replica_hashes(const std::string& run_dir, int rank, std::string& error);

// --- numerics.reference ------------------------------------------------------------------------------------------
// A rank's tensor against the single-process reference's.
struct TensorCompare {
  std::string name;
  double max_abs_diff = 0;
  double max_allowed = 0;  // atol + rtol * |reference| + kTensorRtol * max |reference|, at the worst element
  double scale = 1;        // least-squares factor: got ~= scale * reference
  bool ok = true;
  // Hypotheses tested on the tensors themselves when the comparison fails (numerics.reference's causes):
  bool nonfinite = false;          // NaN or inf on one side only
  bool reference_zero = false;     // the reference is exactly zero everywhere
  bool piles_up = false;           // equals the reference plus this rank's previous step gradient (no zero_grad)
  bool outside_optimizer = false;  // the parameter is in no optimizer param_group (never zeroed, never stepped)
};
struct NumericsEvidence {
  int64_t step = 0;
  int rank = 0;
  std::vector<TensorCompare> grads;        // forward order
  std::vector<TensorCompare> activations;  // forward order (layer outputs)
  std::vector<std::string> layer_kinds;    // per activation: module kind, e.g. "BatchNorm1d"
  bool samples_follow_rule = true;
  int micro_batches = 1;  // the micro-batches the step accumulated (the reference's union batches)
};
// One verified step of one rank, its gradients still to compare: the activations (the same for every rank: the ranks'
// outputs concatenated against the reference's) and whether its samples followed the sampler rule.
NumericsEvidence numerics_step(int64_t step, int rank, const std::vector<TensorCompare>& activations,
                               const std::vector<std::string>& layer_kinds, bool samples_follow_rule);
struct NumericsOutcome {
  std::string failure;       // the evidence could not be gathered: why
  std::string not_compared;  // nothing wrong found, but nothing comparable either: why (a warning)
  std::string skipped;       // not run: what the check lacks and how to give it (a skip)
  int world = 0;
  std::vector<NumericsEvidence> steps;
  int dropout_off_modules = 0;  // the verified steps ran with this many Dropout modules off (said in the verdict)
};

// --- comm.no_sync -----------------------------------------------------------------------------------------------
// One micro-step of one optimizer step: how many gradient collectives it ran.
struct MicroComm {
  int64_t step = 0;
  int micro = 0;
  int collectives = -1;  // -1: not counted (sync_flag says what DDP was told)
  bool sync_flag = true;
};
MicroComm micro_comm(const records::micro_collectives& line);
// Our own job also knows its buckets: each must be reduced once per optimizer step, the step's bytes the parameters'.
struct StepVolume {
  int64_t step = 0;
  size_t buckets_reduced = 0;
  bool each_bucket_once = true;
  uint64_t bytes = 0;
};
struct NoSyncEvidence {
  std::string failure;                           // the evidence could not be read: why
  std::string skipped;                           // nothing to count (e.g. --no-record): why
  std::vector<std::vector<MicroComm>> per_rank;  // every micro-step of every optimizer step, in order
  std::vector<std::vector<StepVolume>> volumes;  // per rank; empty when the subject does not know its buckets
  size_t buckets = 0;
  uint64_t param_bytes = 0;
  std::string counted_how = "counted by a comm hook";
};
// From our own run's trace: allreduce spans per (step, micro), every step's micro-steps 0..accum-1.
NoSyncEvidence no_sync_from_trace(const RunTrace& run, int accum, size_t buckets, uint64_t param_bytes);

// --- checkpoint.complete ---------------------------------------------------------------------------------------
struct CheckpointContents {
  std::string file;
  std::vector<std::string> expected;  // what the live run holds
  std::vector<std::string> found;     // what the file holds
  // What says an item a resume from this file does not need (the companion's facts; our job states none):
  bool epoch_boundary = false;             // saved between epochs (or after an epoch's last batch)
  std::vector<std::string> rng_untouched;  // RNG streams the job never drew from after attach
};
struct CheckpointEvidence {
  std::vector<CheckpointContents> files;  // per rank or per save; the first failing one is the verdict
  std::string none;                       // when there is no checkpoint: what the job did not do (a warning's
                                          // text; empty: a job that must save one, and its missing save a fail)
  std::string failure;                    // a save's log or files do not read (damaged, against the table): what
};

// --- checkpoint.resume -------------------------------------------------------------------------------------------
struct RankResume {
  int rank = 0;
  bool recorded = true;          // the resumed run recorded its final state
  size_t items = 0;              // items compared equal
  std::string first_difference;  // the first item that differs ("" = none)
  std::string difference;        // how it differs: "differs", "differs (max |diff| 0.01)", "is missing after resuming"
};
struct ResumeEvidence {
  std::string skipped;  // not run: how to enable it
  std::string failed;   // a leg failed: what happened
  std::string killed;   // how the interrupted leg ended: "killed right after checkpoint 1 (step 78)"
  std::vector<RankResume> ranks;
  bool params_never_changed = false;  // the straight run's parameters ended as they began: an exact resume is vacuous
  std::string data_stream;            // where the resumed run's data stream differs from the straight run's ("" = same)
  bool resume_point_compared = false;  // both runs recorded their state at the resume point
  std::string first_state_difference;  // there, the first item (in the job's order) that differs ("" = none)
  nlohmann::json details = nlohmann::json::object();
};
// The final states (item -> hash) of the straight and the resumed run, compared rank by rank.
// Where the resumed run's data differs from the straight run's: its first optimizer step's last micro-batch found
// among the straight run's steps, against step `resumed_at` ("" = where it should be, or no samples to tell).
std::string resume_data_stream(const std::vector<ConsumedBatch>& straight, const std::vector<ConsumedBatch>& resumed,
                               int64_t resumed_at);
// The state and RNG streams the straight run held at its first training forward after save `after_save`, against the
// resumed run's at its first (verify/rank<R>.resume_points.jsonl): the first item, in the straight run's order, that
// differs or is missing. `compared` false when either run has no such record.
std::string resume_point_difference(const std::vector<records::resume_points>& straight,
                                    const std::vector<records::resume_points>& resumed, int after_save, bool& compared);
std::vector<RankResume> compare_final_states(const std::vector<std::map<std::string, std::string>>& straight,
                                             const std::vector<std::map<std::string, std::string>>& resumed);
std::map<std::string, std::string> final_state_of(const std::vector<records::final_state>& lines);

// --- train.learns, numerics.finite, train.mode, train.schedule, memory.steady --------------------------------------
// One optimizer step of one rank, as logged in verify/rank<R>.training.jsonl (records::training: the companion writes
// every field; our own job only the step and its memory).
struct TrainingStep {
  int64_t step = 0;
  int params = 0;                                // parameters that require grad
  int forwards = 0;                              // training forwards (grad enabled) in this step: the micro-batches
  bool output_finite = true;                     // every training forward's output so far
  bool model_in_eval = false;                    // a training forward ran with the model itself in eval mode
  std::vector<std::string> eval_modules;         // dropout / batch-norm modules in eval mode during a training forward
  std::vector<std::string> grad_zero;            // synced gradient exactly zero
  std::vector<std::string> grad_nonfinite;       // synced gradient with a NaN or inf
  std::vector<std::string> grad_none;            // requires grad, received none
  bool verified = false;                         // a verified step: `unchanged` was looked at
  std::vector<std::string> unchanged;            // parameters the optimizer step left bit for bit as they were
  std::vector<double> lrs;                       // per param_group
  int64_t scheduler_steps = -1;                  // the scheduler's own count (last_epoch); -1: no scheduler
  int backwards = 0;                             // backward passes that reached the parameters since the last step
  bool stale_grads = false;                      // the first backward after the last step found its gradients there
  bool step_before_backward = false;             // the step ran between a training forward and its backward
  std::vector<std::string> outside_ddp;          // received a gradient DDP does not reduce (changed after wrapping)
  std::vector<std::string> frozen_at_wrap;       // of those, held by the module but frozen when DDP wrapped it
  std::vector<std::string> outside_optimizer;    // received a gradient, require grad, in no optimizer's param_group
  std::string first_nonfinite_layer;             // on the first non-finite forward: the first layer whose output is not
  int64_t rss = 0;                               // resident bytes
  std::optional<int64_t> heap;                   // C heap in use (glibc's mallinfo2); absent without it
  int64_t cuda_allocated = -1;                   // -1: not on CUDA
  std::optional<records::tensor_census> census;  // the live tensors, at the steps a census was taken
};
// What a training log must hold: the companion's every field, or our own job's step and memory.
enum class TrainingFields { companion, memory };
// One line as the judges see it; false with `error` when `fields` asks for a field the line lacks.
bool training_step(const records::training& line, TrainingFields fields, TrainingStep& out, std::string& error);
struct TrainingEvidence {
  std::string failure;                              // a log could not be read: why
  std::vector<std::vector<TrainingStep>> per_rank;  // every logged optimizer step of every rank, in order
  std::vector<std::string> outside_optimizer;       // require grad, in no optimizer param_group
  int64_t warmup_steps = 3;                         // memory: steps before these are warm-up (verified steps too)
  // scheduler.step() calls one optimizer step makes by design (accelerate: world), and why when not 1.
  int64_t scheduler_steps_per_step = 1;
  std::string scheduler_rule;
};
// Every rank's training log in `run_dir` (empty per_rank with `failure` when one is missing, damaged or lacks a field
// `fields` asks for).
TrainingEvidence read_training(const std::string& run_dir, int world, TrainingFields fields);

// --- data.same_dataset ----------------------------------------------------------------------------------------------
// Per rank, the companion's probe of its dataset (records::probe_info; python/ddp_profile/dataset_probe.py), empty
// where the rank probed none.
struct DatasetEvidence {
  std::string failure;
  std::vector<std::optional<records::probe_info>> per_rank;
};

// --- faults.exit -------------------------------------------------------------------------------------------------
// The step at which faults.exit injects each fault (late enough that every rank is training).
inline constexpr int kFaultInjectionStep = 3;
struct FaultScenario {
  std::string kind;
  int rank = 1;
  int step = kFaultInjectionStep;
  RunOutcome outcome;
  bool traces_export = false;  // what the user keeps of the failed run still reads
  std::string export_error;
  std::string run_failed;  // the run ended before its fault was injected: that run, its error line, its log
};
// Exports our fault run's traces to its trace.json; false with the reason when a rank's trace is missing or unreadable.
bool export_fault_run_traces(const std::string& run_folder, int world, std::string& error);

}  // namespace ddp
