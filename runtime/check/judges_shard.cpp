// data.shard_rule: the invariant that the ranks' batches partition the data, pass by pass, whatever the sampler.
//
// A pass is one iteration of the training loader (ConsumedBatch::epoch counts them). In each, an index read by two
// ranks is a batch trained twice per step, an index no rank reads is data the job never sees. What a correct
// DistributedSampler allows is known exactly — its padding repeats a few indices, its drop_last and the batch
// cut's drop_last leave a few out, a run stopped early reads a prefix — so the allowance is taken from its rule cut
// to what each rank read, never from a tolerance. Without a DistributedSampler nothing tells what is allowed: the
// ranks' index sets must be disjoint (accelerate's BatchSamplerShard, a user's own sharding sampler).
//
// A broken partition is said with what broke it, found by comparing what each rank's sampler said of itself
// (seed, num_replicas, rank, its epoch in the pass); the rule order itself only tells which rank strayed.
#include <algorithm>
#include <map>
#include <set>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"

namespace ddp {
namespace {

using Indices = std::vector<int64_t>;

struct PassOfRanks {
  int pass = 0;
  std::vector<Indices> got;                           // per rank, in the order read
  std::vector<std::optional<int64_t>> sampler_epoch;  // per rank: the sampler's epoch when the pass began
};

std::vector<PassOfRanks> by_pass(const std::vector<std::vector<ConsumedBatch>>& per_rank) {
  std::map<int, PassOfRanks> passes;
  const size_t world = per_rank.size();
  for (size_t r = 0; r < world; ++r)
    for (const ConsumedBatch& b : per_rank[r]) {
      PassOfRanks& p = passes[b.epoch];
      p.pass = b.epoch;
      p.got.resize(world);
      p.sampler_epoch.resize(world);
      if (p.got[r].empty()) p.sampler_epoch[r] = b.sampler_epoch;
      p.got[r].insert(p.got[r].end(), b.indices.begin(), b.indices.end());
    }
  std::vector<PassOfRanks> out;
  for (auto& [k, p] : passes) out.push_back(std::move(p));
  return out;
}

// How many distinct indices more than one rank holds, and how many distinct indices all ranks hold together.
struct Cover {
  int64_t shared = 0, read = 0;
};
Cover cover(const std::vector<Indices>& ranks) {
  std::map<int64_t, int> owners;
  for (const Indices& r : ranks)
    for (int64_t i : std::set<int64_t>(r.begin(), r.end())) ++owners[i];
  Cover c;
  c.read = static_cast<int64_t>(owners.size());
  for (const auto& [i, n] : owners) c.shared += n > 1;
  return c;
}

// The first two ranks that share indices: "rank 0 and rank 1 read 254 of the same 512 indices".
std::string shared_pair(const std::vector<Indices>& got) {
  for (size_t a = 0; a < got.size(); ++a)
    for (size_t b = a + 1; b < got.size(); ++b) {
      const std::set<int64_t> in_a(got[a].begin(), got[a].end());
      const std::set<int64_t> in_b(got[b].begin(), got[b].end());
      int64_t both = 0;
      for (int64_t i : in_b) both += in_a.count(i) > 0;
      if (both > 0)
        return "rank " + std::to_string(a) + " and rank " + std::to_string(b) + " read " + std::to_string(both) +
               " of the same " + std::to_string(std::max(in_a.size(), in_b.size())) + " indices";
    }
  return "";
}

template <typename T>
std::string per_rank_values(const std::vector<std::optional<T>>& v) {
  std::string s;
  for (size_t r = 0; r < v.size(); ++r)
    s += (r ? ", " : "") + (v[r] ? std::to_string(*v[r]) : std::string("?")) + " on rank " + std::to_string(r);
  return s;
}

template <typename T>
bool differ(const std::vector<std::optional<T>>& v) {
  for (const auto& x : v)
    if (x && v.front() && *x != *v.front()) return true;
  return false;
}

// What the samplers said of themselves that explains a broken partition; empty when nothing does.
std::string sampler_cause(const PassOfRanks& p, const std::vector<SamplerConfig>& cfg) {
  const size_t world = p.got.size();
  if (cfg.size() == world) {
    std::vector<std::optional<int64_t>> seeds, replicas, ranks;
    for (const SamplerConfig& c : cfg) {
      seeds.push_back(c.seed);
      replicas.push_back(c.num_replicas);
      ranks.push_back(c.rank);
    }
    if (differ(seeds)) return "the ranks' samplers are seeded differently (seed " + per_rank_values(seeds) + ")";
    for (size_t r = 0; r < world; ++r)
      if (replicas[r] && *replicas[r] != static_cast<int64_t>(world))
        return "rank " + std::to_string(r) + "'s sampler has num_replicas=" + std::to_string(*replicas[r]) +
               " in a world of " + std::to_string(world) + " (it shards for another world size)";
    std::map<int64_t, size_t> first_with;
    for (size_t r = 0; r < world; ++r) {
      if (!ranks[r]) continue;
      auto [it, fresh] = first_with.emplace(*ranks[r], r);
      if (!fresh)
        return "ranks " + std::to_string(it->second) + " and " + std::to_string(r) + " both have a sampler of rank " +
               std::to_string(*ranks[r]) + " (rank= not passed, or passed the local rank)";
    }
  }
  if (differ(p.sampler_epoch))
    return "the ranks' samplers are at different epochs in this pass (epoch " + per_rank_values(p.sampler_epoch) +
           "): set_epoch is given a per-rank value";
  return "";
}

std::string pass_name(const PassOfRanks& p) { return "pass " + std::to_string(p.pass); }

// Two passes that drew with the sampler at the same epoch while shuffling: set_epoch was not applied between them.
std::string same_epoch_twice(const std::vector<PassOfRanks>& passes) {
  std::map<int64_t, int> first_pass_at;
  for (const PassOfRanks& p : passes) {
    if (p.sampler_epoch.empty() || !p.sampler_epoch[0]) continue;
    auto [it, fresh] = first_pass_at.emplace(*p.sampler_epoch[0], p.pass);
    if (!fresh)
      return "rank 0's sampler drew passes " + std::to_string(it->second) + " and " + std::to_string(p.pass) +
             " at the same epoch " + std::to_string(it->first) +
             " (the same order twice): set_epoch was not applied before the loader's pass";
  }
  return "";
}

CheckResult partition_broken(const std::string& what, nlohmann::json d) {
  return check_result(check_id::kShardRule, CheckStatus::fail, what, std::move(d));
}

}  // namespace

CheckResult check_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, const ShardExpectation& e) {
  const std::vector<PassOfRanks> passes = by_pass(per_rank);
  if (passes.empty()) return check_result(check_id::kShardRule, CheckStatus::fail, "no consumed batches were logged");
  const int world = static_cast<int>(per_rank.size());
  nlohmann::json per_pass = nlohmann::json::array();
  std::string broken, strayed;
  for (const PassOfRanks& p : passes) {
    // What the rule hands each rank in this pass, at the epoch rank 0's sampler was at (one epoch for all: ranks at
    // different epochs are themselves a broken partition), cut to what the rank read.
    const int epoch = static_cast<int>(p.sampler_epoch[0].value_or(p.pass));
    std::vector<Indices> want(world);
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      want[r] = e.expected(epoch, r);
      want[r].resize(std::min(want[r].size(), p.got[r].size()));
      size_t mism = 0, first = SIZE_MAX;
      for (size_t k = 0; k < p.got[r].size(); ++k)
        if (k >= want[r].size() || p.got[r][k] != want[r][k]) {
          ++mism;
          if (first == SIZE_MAX) first = k;
        }
      ranks.push_back({{"rank", r}, {"consumed", p.got[r].size()}, {"mismatches_vs_rule", mism}});
      if (mism && strayed.empty())
        strayed = "rank " + std::to_string(r) + " strays from the sampler rule first at position " +
                  std::to_string(first) + " (got " + std::to_string(p.got[r][first]) + ", rule says " +
                  (first < want[r].size() ? std::to_string(want[r][first]) : std::string("nothing")) + ")";
    }
    const Cover got = cover(p.got), allowed = cover(want);
    const int64_t unread = e.dataset_size - got.read, allowed_unread = e.dataset_size - allowed.read;
    per_pass.push_back({{"pass", p.pass},
                        {"duplicates", got.shared},
                        {"allowed_duplicates", allowed.shared},
                        {"missing", unread},
                        {"allowed_missing", allowed_unread},
                        {"ranks", ranks}});
    if (!broken.empty() || (got.shared <= allowed.shared && unread <= allowed_unread)) continue;
    broken = pass_name(p) + ": ";
    if (got.shared > allowed.shared)
      broken += shared_pair(p.got) + " (DistributedSampler's padding explains " + std::to_string(allowed.shared) + ")";
    if (unread > allowed_unread)
      broken += std::string(got.shared > allowed.shared ? "; " : "") + std::to_string(unread) + " of " +
                std::to_string(e.dataset_size) + " never read (the rule leaves " + std::to_string(allowed_unread) + ")";
    const std::string cause = sampler_cause(p, e.per_rank);
    broken += ": " + (cause.empty() ? strayed + ": a rank is reading another rank's shard" : cause);
  }
  nlohmann::json d = {{"passes", per_pass}};
  if (!broken.empty()) return partition_broken(broken, d);
  if (e.shuffle) {
    const std::string repeat = same_epoch_twice(passes);
    if (!repeat.empty()) return partition_broken(repeat, d);
    // Without the sampler's own epoch: rank 0's order in its first two passes.
    if (passes.size() >= 2 && !passes[0].sampler_epoch[0]) {
      const Indices &a = passes[0].got[0], &b = passes[1].got[0];
      const size_t k = std::min(a.size(), b.size());
      if (k > 1 && std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), b.begin()))
        return partition_broken("rank 0 saw the same order in passes " + std::to_string(passes[0].pass) + " and " +
                                    std::to_string(passes[1].pass) + ": set_epoch was not applied",
                                d);
    }
  }
  const auto& p0 = per_pass[0];
  return check_result(check_id::kShardRule, CheckStatus::pass,
                      std::to_string(passes.size()) + " pass(es): the " + std::to_string(world) +
                          " ranks partition the data" +
                          (strayed.empty() ? " exactly as DistributedSampler's rule says"
                                           : " (in an order of their own, not DistributedSampler's: " + strayed + ")") +
                          "; pass " + p0["pass"].dump() + ": " + p0["duplicates"].dump() + " shared (padding), " +
                          p0["missing"].dump() + " unread (drop_last, partial batches, an early stop)" +
                          (e.shuffle ? ", a new order each epoch" : ""),
                      d);
}

// No DistributedSampler: the ranks may still shard another way (accelerate's BatchSamplerShard deals each rank every
// world-th batch; a user's own sampler). Disjoint index sets in every pass are a sharding; a shared index is not.
CheckResult judge_no_distributed_sampler(const std::vector<std::vector<ConsumedBatch>>& per_rank,
                                         const ShardExpectation& e) {
  const std::vector<PassOfRanks> passes = by_pass(per_rank);
  const std::string sampler = e.sampler_class.empty() ? "none" : e.sampler_class;
  nlohmann::json d = {{"sampler", sampler}, {"passes", nlohmann::json::array()}};
  for (const PassOfRanks& p : passes) {
    const Cover c = cover(p.got);
    const bool empty_rank = std::any_of(p.got.begin(), p.got.end(), [](const Indices& s) { return s.empty(); });
    d["passes"].push_back({{"pass", p.pass}, {"indices_read", c.read}, {"shared", c.shared}});
    if ((c.shared == 0 && !empty_rank) || per_rank.size() < 2) continue;
    const std::string cause = sampler_cause(p, e.per_rank);
    return partition_broken(
        "the loader has no DistributedSampler (" + sampler + "): in " + pass_name(p) + " " + shared_pair(p.got) +
            (cause.empty() ? ": each rank reads the whole dataset. Pass sampler=DistributedSampler(dataset) to the "
                             "DataLoader (accelerate: give the loader to accelerator.prepare; Lightning: keep "
                             "use_distributed_sampler=True)"
                           : ": " + cause),
        d);
  }
  if (passes.empty() || per_rank.size() < 2)
    return check_result(check_id::kShardRule, CheckStatus::warn,
                        "the loader has no DistributedSampler (" + sampler +
                            ") and no batch's indices were recorded: nothing shows how the ranks share the data",
                        d);
  const auto& p0 = d["passes"][0];
  return check_result(check_id::kShardRule, CheckStatus::pass,
                      std::to_string(passes.size()) + " pass(es): the ranks shard with " + sampler +
                          " (not a DistributedSampler); in every pass their indices are disjoint (pass " +
                          p0["pass"].dump() + ": " + p0["indices_read"].dump() + " items read by " +
                          std::to_string(per_rank.size()) + " ranks)",
                      d);
}

CheckResult judge_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, const ShardExpectation& e) {
  if (!e.distributed) return judge_no_distributed_sampler(per_rank, e);
  return check_shard_rule(per_rank, e);
}

}  // namespace ddp
