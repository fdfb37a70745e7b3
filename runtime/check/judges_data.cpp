// env.manifest, data.shard_rule, data.same_dataset and numerics.rank_sync: the judges that read what the ranks
// logged as it was.
#include <algorithm>
#include <map>
#include <set>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "runtime/common/manifest.h"

namespace ddp {

CheckResult check_manifest(const nlohmann::json& m) {
  const std::vector<std::string>& required = manifest_required_fields();
  std::vector<std::string> missing;
  if (!m.is_object())
    return check_result(check_id::kManifest, CheckStatus::fail, "manifest.json is missing or not valid JSON");
  for (const auto& p : required)
    if (!m.contains(nlohmann::json::json_pointer(p))) missing.push_back(p.substr(1));
  if (m.contains("ranks") && m["ranks"].is_array()) {
    if (m.contains("world_size") && m["ranks"].size() != m["world_size"].get<size_t>())
      missing.push_back("ranks (" + std::to_string(m["ranks"].size()) + " of " + m["world_size"].dump() + ")");
    for (const auto& r : m["ranks"]) {
      std::string who = "ranks[" + r.value("rank", nlohmann::json(-1)).dump() + "]";
      for (const std::string& k : manifest_rank_required_fields())
        if (!r.contains(nlohmann::json::json_pointer(k))) missing.push_back(who + k);
    }
  }
  nlohmann::json d = {{"required", required}, {"missing", missing}};
  if (!missing.empty())
    return check_result(check_id::kManifest, CheckStatus::fail,
                        "manifest lacks " + std::to_string(missing.size()) + " field(s), first: " + missing.front() +
                            " (a run that crashed before the end has only the start-time manifest)",
                        d);
  std::string s = "versions, device, backend " + m["backend"].get<std::string>() + ", world " + m["world_size"].dump() +
                  ", launch " + m["launch"]["method"].get<std::string>() + ", seeds, batch shapes " +
                  m["ranks"][0]["batch"]["x"]["shape"].dump() + " " +
                  m["ranks"][0]["batch"]["x"]["dtype"].get<std::string>() + ", config: all present";
  return check_result(check_id::kManifest, CheckStatus::pass, s, d);
}

CheckResult check_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, int64_t n, bool shuffle,
                             const std::function<std::vector<int64_t>(int, int)>& expected) {
  const int world = static_cast<int>(per_rank.size());
  std::set<int> epochs;
  for (const auto& r : per_rank)
    for (const auto& b : r) epochs.insert(b.epoch);
  if (epochs.empty()) return check_result(check_id::kShardRule, CheckStatus::fail, "no consumed batches were logged");
  nlohmann::json per_epoch = nlohmann::json::array();
  std::string first_problem;
  std::map<int, std::vector<int64_t>> rank0_order;
  for (int e : epochs) {
    std::vector<std::vector<int64_t>> got(world);
    for (int r = 0; r < world; ++r)
      for (const auto& b : per_rank[r])
        if (b.epoch == e) got[r].insert(got[r].end(), b.indices.begin(), b.indices.end());
    rank0_order[e] = got[0];
    std::map<int64_t, int> owners;
    for (int r = 0; r < world; ++r)
      for (int64_t i : std::set<int64_t>(got[r].begin(), got[r].end())) owners[i]++;
    int64_t dup = 0;
    for (auto& [i, c] : owners) dup += c > 1;
    int64_t missing = n - static_cast<int64_t>(owners.size());
    // What the rule assigns, cut to what the ranks ran (a run may stop early with --max-steps).
    std::vector<std::vector<int64_t>> want(world);
    std::map<int64_t, int> want_owners;
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      want[r] = expected(e, r);
      want[r].resize(std::min(want[r].size(), got[r].size()));
      for (int64_t i : std::set<int64_t>(want[r].begin(), want[r].end())) want_owners[i]++;
      size_t mism = 0, first = SIZE_MAX;
      for (size_t k = 0; k < got[r].size(); ++k)
        if (k >= want[r].size() || got[r][k] != want[r][k]) {
          ++mism;
          if (first == SIZE_MAX) first = k;
        }
      std::set<int64_t> mine(got[r].begin(), got[r].end());
      int64_t dups_here = 0;
      for (int64_t i : mine) dups_here += owners[i] > 1;
      ranks.push_back({{"rank", r},
                       {"consumed", got[r].size()},
                       {"shared_with_other_ranks", dups_here},
                       {"mismatches_vs_rule", mism}});
      if (mism && first_problem.empty())
        first_problem = "epoch " + std::to_string(e) + ", rank " + std::to_string(r) + ": " + std::to_string(mism) +
                        " of " + std::to_string(got[r].size()) +
                        " indices differ from the sampler rule, first at position " + std::to_string(first) + " (got " +
                        std::to_string(got[r][first]) + ", rule says " +
                        (first < want[r].size() ? std::to_string(want[r][first]) : std::string("nothing")) + ")";
    }
    int64_t want_dup = 0;
    for (auto& [i, c] : want_owners) want_dup += c > 1;
    int64_t want_missing = n - static_cast<int64_t>(want_owners.size());
    if (dup > want_dup && first_problem.empty())
      first_problem = "epoch " + std::to_string(e) + ": " + std::to_string(dup) +
                      " indices on more than one rank, the padding explains " + std::to_string(want_dup);
    per_epoch.push_back({{"epoch", e},
                         {"duplicates", dup},
                         {"allowed_duplicates", want_dup},
                         {"missing", missing},
                         {"allowed_missing", want_missing},
                         {"ranks", ranks}});
  }
  bool reshuffled = true;
  if (shuffle && rank0_order.size() >= 2) {
    auto it = rank0_order.begin();
    const auto& a = it->second;
    const auto& b = std::next(it)->second;
    size_t k = std::min(a.size(), b.size());
    reshuffled = !std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), b.begin());
  }
  nlohmann::json d = {{"epochs", per_epoch}, {"order_differs_between_epochs", reshuffled}};
  if (!reshuffled)
    return check_result(check_id::kShardRule, CheckStatus::fail,
                        "rank 0 saw the same order in epochs " + std::to_string(rank0_order.begin()->first) + " and " +
                            std::to_string(std::next(rank0_order.begin())->first) + ": set_epoch was not applied",
                        d);
  if (!first_problem.empty())
    return check_result(check_id::kShardRule, CheckStatus::fail,
                        first_problem + " (a rank is reading another rank's shard?)", d);
  const auto& e0 = per_epoch[0];
  return check_result(check_id::kShardRule, CheckStatus::pass,
                      std::to_string(epochs.size()) + " epoch(s), " + std::to_string(world) +
                          " ranks follow DistributedSampler exactly; epoch " + e0["epoch"].dump() + ": " +
                          e0["duplicates"].dump() + " shared (padding), " + e0["missing"].dump() +
                          " unused (drop_last/partial batches)" + (shuffle ? ", order reshuffled each epoch" : ""),
                      d);
}

// No DistributedSampler: the ranks may still shard another way (accelerate's BatchSamplerShard deals each rank every
// world-th batch; a user's own sampler). Disjoint index sets in every epoch are a sharding; a shared index is not.
CheckResult judge_no_distributed_sampler(const std::vector<std::vector<ConsumedBatch>>& per_rank,
                                         const std::string& sampler_class) {
  std::map<int64_t, std::vector<std::set<int64_t>>> seen;  // epoch -> per rank
  for (size_t r = 0; r < per_rank.size(); ++r)
    for (const auto& b : per_rank[r]) {
      auto& ranks = seen[b.epoch];
      ranks.resize(per_rank.size());
      ranks[r].insert(b.indices.begin(), b.indices.end());
    }
  const std::string sampler = sampler_class.empty() ? "none" : sampler_class;
  nlohmann::json d = {{"sampler", sampler}, {"epochs", nlohmann::json::array()}};
  for (const auto& [epoch, ranks] : seen) {
    std::map<int64_t, int> owners;
    for (const auto& s : ranks)
      for (int64_t i : s) ++owners[i];
    int64_t shared = 0;
    for (const auto& [i, n] : owners) shared += n > 1;
    const bool empty_rank = std::any_of(ranks.begin(), ranks.end(), [](const auto& s) { return s.empty(); });
    d["epochs"].push_back({{"epoch", epoch}, {"indices_read", owners.size()}, {"shared", shared}});
    if (shared == 0 && !empty_rank) continue;
    if (per_rank.size() < 2 || ranks.size() < 2) break;
    int64_t with0 = 0;
    for (int64_t i : ranks[1]) with0 += ranks[0].count(i) > 0;
    return check_result(
        check_id::kShardRule, CheckStatus::fail,
        "the loader has no DistributedSampler (" + sampler + "): in epoch " + std::to_string(epoch) + " rank 1 read " +
            std::to_string(with0) + " of the same " + std::to_string(ranks[1].size()) +
            " indices as rank 0; each rank reads the whole dataset. Pass sampler=DistributedSampler(dataset) to the "
            "DataLoader (accelerate: give the loader to accelerator.prepare; Lightning: keep "
            "use_distributed_sampler=True)",
        d);
  }
  if (seen.empty() || per_rank.size() < 2)
    return check_result(check_id::kShardRule, CheckStatus::warn,
                        "the loader has no DistributedSampler (" + sampler +
                            ") and no batch's indices were recorded: "
                            "nothing shows how the ranks share the data",
                        d);
  const auto& e0 = d["epochs"][0];
  return check_result(check_id::kShardRule, CheckStatus::pass,
                      std::to_string(seen.size()) + " epoch(s): the ranks shard with " + sampler +
                          " (not a DistributedSampler); in every epoch their indices are disjoint (epoch " +
                          e0["epoch"].dump() + ": " + e0["indices_read"].dump() + " items read by " +
                          std::to_string(per_rank.size()) + " ranks)",
                      d);
}

CheckResult judge_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, const ShardExpectation& e) {
  if (!e.distributed) return judge_no_distributed_sampler(per_rank, e.sampler_class);
  return check_shard_rule(per_rank, e.dataset_size, e.shuffle, e.expected);
}

CheckResult check_rank_sync(const std::vector<std::map<int64_t, std::string>>& h) {
  if (h.size() < 2) return check_result(check_id::kRankSync, CheckStatus::skip, "one rank: nothing to compare");
  size_t compared = 0;
  for (const auto& [step, hash] : h[0]) {
    for (size_t r = 1; r < h.size(); ++r) {
      auto it = h[r].find(step);
      if (it == h[r].end()) continue;
      ++compared;
      if (it->second != hash) {
        std::string when =
            step < 0 ? "at start (after the initial broadcast)" : "after optimizer step " + std::to_string(step);
        return check_result(check_id::kRankSync, CheckStatus::fail,
                            "rank " + std::to_string(r) + "'s parameters differ from rank 0's " + when + " (hash " +
                                it->second + " vs " + hash +
                                "): gradients were not synchronised or ranks ran different updates",
                            {{"first_step", step}, {"rank", r}});
      }
    }
  }
  if (compared == 0) return check_result(check_id::kRankSync, CheckStatus::fail, "no parameter hashes to compare");
  // Replicas that never changed are identical whatever the synchronisation does: no pass.
  std::set<std::string> distinct;
  for (const auto& [step, hash] : h[0]) distinct.insert(hash);
  if (distinct.size() == 1 && h[0].size() > 1)
    return check_result(check_id::kRankSync, CheckStatus::warn,
                        "the parameters never changed in " + std::to_string(h[0].size() - 1) +
                            " optimizer steps: identical replicas prove nothing about the synchronisation (see "
                            "train.learns)",
                        {{"comparisons", compared}, {"never_changed", true}});
  return check_result(check_id::kRankSync, CheckStatus::pass,
                      "parameters bitwise identical on all ranks at start and after each of " +
                          std::to_string(h[0].size() - 1) + " optimizer steps (" + std::to_string(compared) +
                          " hash comparisons)",
                      {{"comparisons", compared}});
}

namespace {
nlohmann::json json_of(const std::optional<records::probe_info>& p) {
  if (!p) return nullptr;
  nlohmann::json j = {{"class", p->class_name ? nlohmann::json(*p->class_name) : nlohmann::json()}};
  if (p->size) j["size"] = *p->size;
  if (p->items) j["items"] = *p->items;
  if (p->random_items) j["random_items"] = *p->random_items;
  if (p->not_probed) j["not_probed"] = *p->not_probed;
  return j;
}
// index -> digest of a probe's items ([[index, digest], ...]); an index drawn at random on every read (augmentation)
// is on no rank's list.
std::map<int64_t, std::string> digests(const records::probe_info& p) {
  std::map<int64_t, std::string> m;
  if (p.items && p.items->is_array())
    for (const auto& it : *p.items)
      if (it.is_array() && it.size() == 2 && it[0].is_number_integer() && it[1].is_string()) m[it[0]] = it[1];
  return m;
}
}  // namespace

CheckResult judge_same_dataset(const DatasetEvidence& e) {
  const char* id = check_id::kSameDataset;
  if (!e.failure.empty()) return check_result(id, CheckStatus::fail, e.failure);
  nlohmann::json d = {{"ranks", nlohmann::json::array()}};
  for (const auto& p : e.per_rank) d["ranks"].push_back(json_of(p));
  if (e.per_rank.empty() || !e.per_rank.front())
    return check_result(id, CheckStatus::fail, "no rank recorded its dataset (the loader never yielded a batch?)", d);
  for (size_t r = 0; r < e.per_rank.size(); ++r) {
    const auto& p = e.per_rank[r];
    if (!p) return check_result(id, CheckStatus::fail, "rank " + std::to_string(r) + " recorded no dataset", d);
    if (p->not_probed)
      return check_result(id, CheckStatus::skip,
                          "not compared: " + *p->not_probed + " (rank " + std::to_string(r) + ")", d);
  }
  const records::probe_info& first = *e.per_rank.front();
  auto size_of = [](const records::probe_info& p) { return p.size ? std::to_string(*p.size) : "an unknown number of"; };
  for (size_t r = 1; r < e.per_rank.size(); ++r)
    if (e.per_rank[r]->size != first.size)
      return check_result(id, CheckStatus::fail,
                          "rank " + std::to_string(r) + "'s dataset has " + size_of(*e.per_rank[r]) +
                              " items, rank 0's " + size_of(first) + ": each rank builds its own dataset",
                          d);
  const auto base = digests(first);
  size_t compared = 0;
  for (size_t r = 1; r < e.per_rank.size(); ++r)
    for (const auto& [index, digest] : digests(*e.per_rank[r])) {
      auto it = base.find(index);
      if (it == base.end()) continue;
      ++compared;
      if (it->second != digest)
        return check_result(id, CheckStatus::fail,
                            "sample " + std::to_string(index) + " differs between rank 0 and rank " +
                                std::to_string(r) +
                                ": each rank builds its own dataset (unseeded synthetic data, a split drawn without "
                                "a fixed generator, a per-rank file list?)",
                            d);
    }
  const size_t random_items = first.random_items ? first.random_items->size() : 0;
  if (e.per_rank.size() < 2)
    return check_result(id, CheckStatus::skip, "one rank: no other rank's dataset to compare", d);
  if (compared == 0)
    return check_result(id, CheckStatus::skip,
                        "not compared: every probed item differs between two reads under one seed (drawn at random "
                        "on every read)",
                        d);
  return check_result(
      id, CheckStatus::pass,
      "the same " + size_of(first) + "-item " + first.class_name.value_or("dataset") + " on every rank: " +
          std::to_string(base.size()) + " items at the same indices equal on " + std::to_string(e.per_rank.size()) +
          " ranks" + (random_items ? " (" + std::to_string(random_items) + " random on every read, not compared)" : ""),
      d);
}

}  // namespace ddp
