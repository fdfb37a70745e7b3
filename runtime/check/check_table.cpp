#include "runtime/check/check_table.h"

#include <algorithm>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"

namespace ddp {
namespace {

CheckResult manifest(LadderState& L) { return check_manifest(L.main.manifest, L.main.manifest_error); }

CheckResult shard_rule(LadderState& L) {
  std::vector<std::vector<ConsumedBatch>> per_rank(L.main.world);
  for (int r = 0; r < L.main.world; ++r) {
    std::string err;
    per_rank[r] = read_consumed(L.main.dir, r, err);
    if (per_rank[r].empty())
      return check_result(check_id::kShardRule, CheckStatus::fail,
                          err.empty() ? "rank " + std::to_string(r) + " logged no batches" : err);
  }
  CheckResult r = judge_shard_rule(per_rank, L.subject.shard_expectation(L.main));
  L.samples_follow_rule = r.status == CheckStatus::pass;
  return r;
}

CheckResult numerics_reference(LadderState& L) {
  return judge_numerics_outcome(L.subject.numerics(L.main, L.samples_follow_rule));
}

CheckResult rank_sync(LadderState& L) {
  std::vector<Replicas> per_rank(L.main.world);
  for (int r = 0; r < L.main.world; ++r) {
    std::string err;
    per_rank[r] = read_replicas(L.main.dir, r, err);
    if (!err.empty()) return check_result(check_id::kRankSync, CheckStatus::fail, err);
  }
  return check_rank_sync(per_rank);
}

CheckResult same_dataset(LadderState& L) { return judge_same_dataset(L.subject.datasets(L.main)); }
CheckResult learns(LadderState& L) { return judge_learns(L.subject.training(L.main)); }
CheckResult finite(LadderState& L) { return judge_finite(L.subject.training(L.main)); }
CheckResult mode(LadderState& L) { return judge_mode(L.subject.training(L.main)); }
CheckResult schedule(LadderState& L) { return judge_schedule(L.subject.training(L.main)); }
CheckResult iteration(LadderState& L) { return judge_iteration(L.subject.training(L.main)); }
CheckResult memory(LadderState& L) { return judge_memory(L.subject.training(L.main)); }
CheckResult no_sync(LadderState& L) { return judge_no_sync(L.subject.no_sync(L.main)); }
CheckResult checkpoint_complete(LadderState& L) { return judge_checkpoint_complete(L.subject.checkpoints(L.main)); }
CheckResult checkpoint_resume(LadderState& L) { return judge_resume(L.subject.resume(L.out_dir, L.main)); }
CheckResult faults_exit(LadderState& L) { return judge_faults(L.subject.faults(L.out_dir, L.main)); }

}  // namespace

const std::vector<CheckEntry>& check_table() {
  static const std::vector<CheckEntry> table = {
      {check_id::kManifest, EvidenceFrom::main_run, kEverySubject, manifest},
      {check_id::kShardRule, EvidenceFrom::main_run, kEverySubject, shard_rule},
      {check_id::kSameDataset, EvidenceFrom::main_run, kUserScript, same_dataset},
      {check_id::kLearns, EvidenceFrom::main_run, kUserScript, learns},
      {check_id::kFinite, EvidenceFrom::main_run, kUserScript, finite},
      {check_id::kMode, EvidenceFrom::main_run, kUserScript, mode},
      {check_id::kSchedule, EvidenceFrom::main_run, kUserScript, schedule},
      {check_id::kIteration, EvidenceFrom::main_run, kUserScript, iteration},
      {check_id::kReference, EvidenceFrom::main_run, kEverySubject, numerics_reference},
      {check_id::kRankSync, EvidenceFrom::main_run, kEverySubject, rank_sync},
      {check_id::kMemory, EvidenceFrom::main_run, kEverySubject, memory},
      {check_id::kNoSync, EvidenceFrom::main_run, kEverySubject, no_sync},
      {check_id::kCheckpointComplete, EvidenceFrom::main_run, kEverySubject, checkpoint_complete,
       check_id::kCheckpointResume,
       "the run resumed exactly without them (a resume from another point may still need them)"},
      {check_id::kCheckpointResume, EvidenceFrom::own_runs, kEverySubject, checkpoint_resume},
      {check_id::kFaultsExit, EvidenceFrom::own_runs, kEverySubject, faults_exit},
  };
  return table;
}

void settle(std::vector<CheckResult>& results) {
  auto result_of = [&](const char* id) -> const CheckResult* {
    for (const CheckResult& r : results)
      if (r.id == id) return &r;
    return nullptr;
  };
  for (const CheckEntry& c : check_table()) {
    if (!c.settled_by) continue;
    const CheckResult* by = result_of(c.settled_by);
    if (!by || by->status != CheckStatus::pass) continue;
    for (CheckResult& r : results)
      if (r.id == c.id && r.status == CheckStatus::fail) {
        r.status = CheckStatus::warn;
        r.summary += std::string("; but ") + c.settled_by + " passed: " + c.settled_because;
      }
  }
}

std::vector<std::string> check_ids() {
  std::vector<std::string> ids;
  for (const CheckEntry& c : check_table()) ids.push_back(c.id);
  return ids;
}

std::string unknown_check_id(const std::vector<std::string>& ids) {
  const std::vector<std::string> known = check_ids();
  for (const auto& id : ids)
    if (std::find(known.begin(), known.end(), id) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return "--checks: unknown check id '" + id + "' (known: " + list + ")";
    }
  return {};
}

}  // namespace ddp
