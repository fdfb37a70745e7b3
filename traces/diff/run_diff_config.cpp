// Manifest/config differences between two runs, and which distributed variables they change.
#include <set>

#include "traces/diff/run_diff.h"
#include "traces/diff/run_diff_steps.h"

namespace ddp {
namespace {

void flatten_into(const nlohmann::json& j, const std::string& prefix, std::map<std::string, nlohmann::json>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten_into(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j;
  }
}

std::string variable_of(const std::string& key) {
  for (const auto& v : distributed_variables())
    for (const char* k : v.keys) {
      std::string ks(k);
      // "seeds" covers "seeds.data", "seeds.weights", ...
      if (key == ks || (key.size() > ks.size() && key.compare(0, ks.size(), ks) == 0 && key[ks.size()] == '.'))
        return v.name;
    }
  return {};
}

}  // namespace

const std::vector<DistributedVariable>& distributed_variables() {
  static const std::vector<DistributedVariable> kVars = {
      {"world size", {"world_size", "config.nproc"}},
      {"backend", {"backend", "config.backend"}},
      {"batch size", {"config.batch_size"}},
      {"accumulation steps", {"config.accum_steps"}},
      {"AMP", {"config.amp"}},
      {"bucket size", {"config.bucket_mb"}},
      {"seed", {"config.seed", "seeds"}},
      {"launch method", {"launch.method"}},
      {"workers", {"config.workers"}},
  };
  return kVars;
}

std::map<std::string, nlohmann::json> flatten_manifest(const nlohmann::json& manifest) {
  std::map<std::string, nlohmann::json> out;
  if (!manifest.is_object()) return out;
  static const std::set<std::string> kSkip = {"start_time", "end_time", "rank_hosts", "clock", "ranks"};
  for (auto it = manifest.begin(); it != manifest.end(); ++it)
    if (!kSkip.count(it.key())) flatten_into(it.value(), it.key(), out);
  // Per rank, keep what describes the setup (host, device, batch shapes); the rest are outcomes compared elsewhere.
  auto ranks = manifest.find("ranks");
  if (ranks != manifest.end() && ranks->is_array())
    for (size_t i = 0; i < ranks->size(); ++i) {
      const auto& r = (*ranks)[i];
      if (!r.is_object()) continue;
      std::string p = "ranks." + std::to_string(i) + ".";
      for (const char* k : {"host", "device", "batch"})
        if (r.contains(k)) flatten_into(r[k], p + k, out);
    }
  return out;
}

namespace run_diff_detail {

std::vector<ConfigDifference> diff_config(const nlohmann::json& manifest_a, const nlohmann::json& manifest_b,
                                          std::set<std::string>& changed_variables) {
  std::vector<ConfigDifference> out;
  auto fa = flatten_manifest(manifest_a);
  auto fb = flatten_manifest(manifest_b);
  std::set<std::string> keys;
  for (const auto& [k, v] : fa) keys.insert(k);
  for (const auto& [k, v] : fb) keys.insert(k);
  for (const auto& k : keys) {
    auto ia = fa.find(k);
    auto ib = fb.find(k);
    nlohmann::json va = ia == fa.end() ? nlohmann::json(nullptr) : ia->second;
    nlohmann::json vb = ib == fb.end() ? nlohmann::json(nullptr) : ib->second;
    if (va == vb) continue;
    ConfigDifference c{k, va, vb, variable_of(k)};
    if (!c.variable.empty()) changed_variables.insert(c.variable);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace run_diff_detail
}  // namespace ddp
