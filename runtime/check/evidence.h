#pragma once
// What a check is judged on, as plain data: each subject under check (our job, the user's script) gathers it its own
// way (runtime/check/subject.h) and the one judge of the check decides (judges.h). Also the readers of the
// verification logs both subjects write in the same layout (verify/rank<R>.<kind>.jsonl, traces/model/run_folder.h).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/run_outcome.h"
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
};
// Every batch a rank logged; empty with `error` when the log is missing or has a damaged line.
std::vector<ConsumedBatch> read_consumed(const std::string& run_dir, int rank, std::string& error);

// What the sampler should have handed each rank.
struct ShardExpectation {
  bool distributed = true;    // false: the loader has no DistributedSampler (every rank reads everything)
  std::string sampler_class;  // what it has instead
  int64_t dataset_size = 0;
  bool shuffle = true;
  std::function<std::vector<int64_t>(int epoch, int rank)> expected;  // the rule's indices, in order
};

// --- numerics.rank_sync --------------------------------------------------------------------------------------------
// Parameter hashes per step (step -1 = after the initial broadcast); empty with `error` when unreadable.
std::map<int64_t, std::string> read_replica_hashes(const std::string& run_dir, int rank, std::string& error);

// --- numerics.reference ------------------------------------------------------------------------------------------
// A rank's tensor against the single-process reference's.
struct TensorCompare {
  std::string name;
  double max_abs_diff = 0;
  double max_allowed = 0;  // atol + rtol * |reference| + kTensorRtol * max |reference|, at the worst element
  double scale = 1;        // least-squares factor: got ~= scale * reference
  bool ok = true;
};
struct NumericsEvidence {
  int64_t step = 0;
  int rank = 0;
  std::vector<TensorCompare> grads;        // forward order
  std::vector<TensorCompare> activations;  // forward order (layer outputs)
  std::vector<std::string> layer_kinds;    // per activation: module kind, e.g. "BatchNorm1d"
  bool samples_follow_rule = true;
};
// One verified step of one rank, its gradients still to compare: the activations (the same for every rank: the ranks'
// outputs concatenated against the reference's) and whether its samples followed the sampler rule.
NumericsEvidence numerics_step(int64_t step, int rank, const std::vector<TensorCompare>& activations,
                               const std::vector<std::string>& layer_kinds, bool samples_follow_rule);
struct NumericsOutcome {
  std::string failure;       // the evidence could not be gathered: why
  std::string not_compared;  // nothing wrong found, but nothing comparable either: why (a warning)
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
std::vector<MicroComm> parse_micro_comm(const std::vector<nlohmann::json>& lines);
// Our own job also knows its buckets: each must be reduced once per optimizer step, the step's bytes the parameters'.
struct StepVolume {
  int64_t step = 0;
  size_t buckets_reduced = 0;
  bool each_bucket_once = true;
  uint64_t bytes = 0;
};
struct NoSyncEvidence {
  std::string failure;                            // the evidence could not be read: why
  std::string skipped;                            // nothing to count (e.g. --no-record): why
  std::vector<std::vector<MicroComm>> per_rank;   // every micro-step of every optimizer step, in order
  std::vector<std::vector<StepVolume>> volumes;   // per rank; empty when the subject does not know its buckets
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
};
struct CheckpointEvidence {
  std::vector<CheckpointContents> files;  // per rank or per save; the first failing one is the verdict
  std::string none;                       // when there is no checkpoint: why (the verdict's text)
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
  nlohmann::json details = nlohmann::json::object();
};
// The final states (item -> hash) of the straight and the resumed run, compared rank by rank.
std::vector<RankResume> compare_final_states(const std::vector<std::map<std::string, std::string>>& straight,
                                             const std::vector<std::map<std::string, std::string>>& resumed);
std::map<std::string, std::string> parse_final_state(const std::vector<nlohmann::json>& lines);

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
};
// Exports our fault run's traces to its trace.json; false with the reason when a rank's trace is missing or unreadable.
bool export_fault_run_traces(const std::string& run_folder, int world, std::string& error);

}  // namespace ddp
