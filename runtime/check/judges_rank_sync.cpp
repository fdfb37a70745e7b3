// numerics.rank_sync: the invariant that everything DDP means to replicate is equal on every rank — the parameters
// (a hash of their bits) and, from the companion, the buffers, each param_group's hyperparameters, the scheduler's
// state, the sampler's settings and the loss scale — at start and after each optimizer step.
//
// The first difference in step order is the cause: a learning rate that differs from the start explains parameters
// that differ after step 0, buffers that drift explain nothing in the parameters but break evaluation and the
// checkpoint (rank 0's statistics only). So a state key that differs no later than the parameters do is named, by
// its key and both values, with what usually sets it; the parameters alone are named only when nothing before them
// differs.
#include <set>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"

namespace ddp {
namespace {

struct StateDiff {
  int64_t step = 0;
  size_t rank = 0;
  std::string key, mine, theirs;
};

std::string when(int64_t step) {
  return step < 0 ? "at start (after the initial broadcast)" : "at optimizer step " + std::to_string(step);
}

// What usually makes a key of that family differ between ranks.
std::string likely(const std::string& key) {
  auto family = [&](const char* prefix) { return key.rfind(prefix, 0) == 0; };
  if (family("buffer"))
    return "the buffers drift apart: each rank keeps its own (DDP(broadcast_buffers=False) without SyncBatchNorm, or "
           "a buffer the script sets per rank); nn.SyncBatchNorm.convert_sync_batchnorm or broadcast_buffers=True "
           "keep them equal";
  if (family("optimizer/"))
    return "the ranks' optimizers are configured differently (a hyperparameter computed from the rank, or a "
           "param_group added on one rank)";
  if (family("scheduler/"))
    return "the ranks' schedulers differ (stepped a different number of times, or built with per-rank settings)";
  if (family("sampler/"))
    return "the ranks' samplers are configured differently (each rank's data order is then its own)";
  if (family("scaler/")) return "the ranks' loss scales differ (a GradScaler that skipped a step on one rank only)";
  return "the ranks ran different updates";
}

// The first key whose value differs between rank 0 and another rank, in step order; buffers' joint digest only
// when no buffer of its own differs (then the difference is in bits the norms do not show).
std::optional<StateDiff> first_state_diff(const std::vector<Replicas>& per_rank) {
  for (const auto& [step, mine] : per_rank[0].state)
    for (size_t r = 1; r < per_rank.size(); ++r) {
      auto it = per_rank[r].state.find(step);
      if (it == per_rank[r].state.end()) continue;
      const std::map<std::string, std::string> theirs(it->second.begin(), it->second.end());
      std::optional<StateDiff> joint;
      for (const auto& [key, value] : mine) {
        auto t = theirs.find(key);
        if (t == theirs.end() || t->second == value) continue;
        if (key != "buffers") return StateDiff{step, r, key, value, t->second};
        joint = StateDiff{step, r, key, value, t->second};
      }
      if (joint) return joint;
    }
  return std::nullopt;
}

struct ParamDiff {
  int64_t step = 0;
  size_t rank = 0;
  std::string mine, theirs;
};

std::optional<ParamDiff> first_param_diff(const std::vector<Replicas>& per_rank, size_t& compared) {
  for (const auto& [step, hash] : per_rank[0].param_hash)
    for (size_t r = 1; r < per_rank.size(); ++r) {
      auto it = per_rank[r].param_hash.find(step);
      if (it == per_rank[r].param_hash.end()) continue;
      ++compared;
      if (it->second != hash) return ParamDiff{step, r, hash, it->second};
    }
  return std::nullopt;
}

}  // namespace

CheckResult check_rank_sync(const std::vector<Replicas>& per_rank) {
  const char* id = check_id::kRankSync;
  if (per_rank.size() < 2) return check_result(id, CheckStatus::skip, "one rank: nothing to compare");
  size_t compared = 0;
  const std::optional<ParamDiff> params = first_param_diff(per_rank, compared);
  const std::optional<StateDiff> state = first_state_diff(per_rank);
  if (state && (!params || state->step <= params->step)) {
    std::string s = state->key + ": " + state->mine + " on rank 0, " + state->theirs + " on rank " +
                    std::to_string(state->rank) + " " + when(state->step);
    if (params)
      s += "; rank " + std::to_string(params->rank) + "'s parameters then differ from rank 0's after optimizer step " +
           std::to_string(params->step);
    return check_result(id, CheckStatus::fail, s + ": " + likely(state->key),
                        {{"first_step", state->step}, {"rank", state->rank}, {"key", state->key}});
  }
  if (params)
    return check_result(id, CheckStatus::fail,
                        "rank " + std::to_string(params->rank) + "'s parameters differ from rank 0's " +
                            (params->step < 0 ? "at start (after the initial broadcast)"
                                              : "after optimizer step " + std::to_string(params->step)) +
                            " (hash " + params->theirs + " vs " + params->mine +
                            ") while every other replicated setting agrees: gradients were not synchronised",
                        {{"first_step", params->step}, {"rank", params->rank}});
  if (compared == 0) return check_result(id, CheckStatus::fail, "no parameter hashes to compare");
  // Replicas that never changed are identical whatever the synchronisation does: no pass.
  std::set<std::string> distinct;
  for (const auto& [step, hash] : per_rank[0].param_hash) distinct.insert(hash);
  const size_t steps = per_rank[0].param_hash.size() - 1;
  if (distinct.size() == 1 && steps > 0)
    return check_result(id, CheckStatus::warn,
                        "the parameters never changed in " + std::to_string(steps) +
                            " optimizer steps: identical replicas prove nothing about the synchronisation (see "
                            "train.learns)",
                        {{"comparisons", compared}, {"never_changed", true}});
  size_t keys = 0;
  for (const auto& [step, pairs] : per_rank[0].state) keys = std::max(keys, pairs.size());
  return check_result(id, CheckStatus::pass,
                      "parameters bitwise identical on all ranks at start and after each of " + std::to_string(steps) +
                          " optimizer steps (" + std::to_string(compared) + " hash comparisons)" +
                          (keys ? "; buffers, optimizer, scheduler and sampler settings equal too (" +
                                      std::to_string(keys) + " keys a step)"
                                : std::string()),
                      {{"comparisons", compared}, {"state_keys", keys}});
}

CheckResult check_rank_sync(const std::vector<std::map<int64_t, std::string>>& hashes_per_rank) {
  std::vector<Replicas> per_rank(hashes_per_rank.size());
  for (size_t r = 0; r < per_rank.size(); ++r) per_rank[r].param_hash = hashes_per_rank[r];
  return check_rank_sync(per_rank);
}

}  // namespace ddp
