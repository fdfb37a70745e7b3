#pragma once
// The closed-loop checks behind `ddp_profile --check`. Each check's judgement is a pure function of recorded data
// (manifest, verification logs, traces, run outcomes), so unit tests can feed it planted faults without processes;
// run_check (checks_run.cpp) produces that data with real ranks.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/launch/supervisor.h"
#include "runtime/common/check_ids.h"
#include "traces/model/run_folder.h"

namespace ddp {

enum class CheckStatus { pass, warn, fail, skip };
const char* status_name(CheckStatus s);

struct CheckResult {
  std::string id;
  CheckStatus status = CheckStatus::skip;
  std::string summary;  // one line: what was compared, the numbers, and on failure where and the likely cause
  nlohmann::json details = nlohmann::json::object();
};
// A result as every judge builds one (ours and the user's job's).
CheckResult check_result(const std::string& id, CheckStatus status, std::string summary,
                         nlohmann::json details = nlohmann::json::object());


// env.manifest: every field a reader needs to trust the run is present.
CheckResult check_manifest(const nlohmann::json& manifest);

// One consumed micro-batch, as logged by a rank (verify/rank<R>.samples.jsonl).
struct ConsumedBatch {
  int epoch = 0;
  int64_t step = 0;
  int micro = 0;
  int64_t batch = 0;
  std::vector<int64_t> indices;
};
std::vector<ConsumedBatch> read_consumed(const std::string& run_dir, int rank, std::string& error);

// data.shard_rule: `expected(epoch, rank)` gives the indices the sampler rule assigns (in order, batches the job runs).
CheckResult check_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, int64_t dataset_size,
                             bool shuffle, const std::function<std::vector<int64_t>(int, int)>& expected);

// numerics.rank_sync: parameter hashes per step (step -1 = after the initial broadcast) for every rank.
CheckResult check_rank_sync(const std::vector<std::map<int64_t, std::string>>& hashes_per_rank);
std::map<int64_t, std::string> read_replica_hashes(const std::string& run_dir, int rank, std::string& error);

// comm.no_sync: allreduce spans per optimizer step and micro-step against the accumulation setting.
CheckResult check_no_sync(const RunTrace& run, int accum_steps, size_t buckets, uint64_t param_bytes);

// numerics.reference, the comparison part: per parameter (forward order), a rank's synced gradient against the
// single-rank reference; per layer, the ranks' activations against the reference's.
struct TensorCompare {
  std::string name;
  double max_abs_diff = 0;
  double max_allowed = 0;  // atol + rtol * |reference| + kTensorRtol * max |reference|, at the worst element
  double scale = 1;        // least-squares factor: got ~= scale * reference
  bool ok = true;
};
// Beyond atol + rtol * |reference| per element, a share of the tensor's largest magnitude: a gradient is a sum over
// the batch, and the reference sums the union batch in one go where the ranks sum their halves, so float32 rounds
// the two differently, by up to ~sqrt(terms) x eps x the sum of the terms' magnitudes. Where the terms cancel (a
// first conv layer's weight gradient: 0.0136 at most, summed over 16 K positions) that is 1e-5 absolute and
// 0.07 % of the tensor's largest element (AMD EPYC, PyTorch 2.11's oneDNN on AVX2). 0.2 % keeps every planted
// mistake far outside (a sum-reduced loss is 100 %, BatchNorm without SyncBatchNorm several %).
inline constexpr double kTensorRtol = 2e-3;
TensorCompare compare_values(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref,
                             double rtol, double atol);
struct NumericsEvidence {
  int64_t step = 0;
  int rank = 0;
  std::vector<TensorCompare> grads;        // forward order
  std::vector<TensorCompare> activations;  // forward order (layer outputs)
  std::vector<std::string> layer_kinds;    // per activation: module kind, e.g. "BatchNorm1d"
  bool samples_follow_rule = true;
};
CheckResult judge_numerics(const std::vector<NumericsEvidence>& steps, int world, double rtol, double atol);

// checkpoint.complete: what the file holds against what the live run holds.
CheckResult check_checkpoint_items(const std::vector<std::string>& expected, const std::vector<std::string>& found,
                                   const std::string& file);

// faults.exit: one supervised run with an injected fault.
// The step at which faults.exit injects each fault (late enough that every rank is training).
inline constexpr int kFaultInjectionStep = 3;
struct FaultScenario {
  std::string kind;
  int rank = 1;
  int step = kFaultInjectionStep;
  RunOutcome outcome;
  bool traces_export = false;
  std::string export_error;
};
CheckResult judge_faults(const std::vector<FaultScenario>& scenarios);
// Exports a fault run's traces to its trace.json; false with the reason when a rank's trace is missing or unreadable.
bool export_fault_run_traces(const std::string& run_folder, int world, std::string& error);

nlohmann::json checks_json(const std::vector<CheckResult>& results);
std::string checks_table(const std::vector<CheckResult>& results);

}  // namespace ddp
