#pragma once
// The judgements that only the user's job needs, as pure functions of what the companion recorded (the others are
// runtime/verify/checks.h's, shared with our own job). Unit-tested with planted records.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/verify/checks.h"

namespace ddp {

// The companion's per-rank files inside verify/ (names owned here and in traces/model/run_folder.h).
std::string user_collectives_file(int rank);         // verify/rank<R>.collectives.jsonl
std::string user_checkpoints_file(int rank);         // verify/rank<R>.checkpoints.jsonl
std::string user_final_file(int rank);               // verify/rank<R>.final.jsonl
std::string user_reference_file(int64_t step);       // verify/reference_step<S>.pt
std::string user_reference_meta_file(int64_t step);  // verify/reference_step<S>.json (layer kinds, batch sizes)

// Every line of a JSON-lines file; false with `error` when it is missing or a line does not parse.
bool read_json_lines(const std::string& path, std::vector<nlohmann::json>& out, std::string& error);

// comm.no_sync: per micro-step, how many gradient collectives the rank ran (from the companion's counting comm hook,
// or DDP's require_backward_grad_sync flag when the script has a comm hook of its own).
struct MicroComm {
  int64_t step = 0;
  int micro = 0;
  int collectives = -1;  // -1: not counted (sync_flag says what DDP was told)
  bool sync_flag = true;
};
std::vector<MicroComm> parse_micro_comm(const std::vector<nlohmann::json>& lines);
CheckResult judge_user_no_sync(const std::vector<std::vector<MicroComm>>& per_rank);

// data.shard_rule when the loader has no DistributedSampler: how many indices each rank shares with rank 0.
CheckResult judge_no_distributed_sampler(const std::vector<std::vector<ConsumedBatch>>& per_rank,
                                         const std::string& sampler_class);

// checkpoint.resume: the final state (name -> hash) of the straight run against the resumed run's.
CheckResult judge_resume_states(const std::vector<std::map<std::string, std::string>>& straight,
                                const std::vector<std::map<std::string, std::string>>& resumed, int killed_after_save,
                                int64_t killed_at_step);
std::map<std::string, std::string> parse_final_state(const std::vector<nlohmann::json>& lines);

}  // namespace ddp
