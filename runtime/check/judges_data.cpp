// env.manifest and data.same_dataset: the judges that read what the ranks logged as it was (data.shard_rule:
// judges_shard.cpp, numerics.rank_sync: judges_rank_sync.cpp).
#include <algorithm>
#include <map>
#include <set>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "runtime/common/manifest.h"

namespace ddp {

CheckResult check_manifest(const std::optional<Manifest>& manifest, const std::string& unread) {
  const std::vector<std::string>& required = manifest_required_fields();
  std::vector<std::string> missing;
  if (!manifest) return check_result(check_id::kManifest, CheckStatus::fail, unread);
  // Read against records.def already (every type checked): what is left is whether each field a reader needs is
  // there, said field by field.
  const nlohmann::json m = to_json(*manifest);
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
// index -> digest of a probe's items ([[index, digest], ...], as the subject checked them); an index drawn at
// random on every read (augmentation) is on no rank's list.
std::map<int64_t, std::string> digests(const records::probe_info& p) {
  std::map<int64_t, std::string> m;
  if (p.items)
    for (const auto& it : *p.items) m[it[0].get<int64_t>()] = it[1].get<std::string>();
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
