#include "traces/kineto/kineto_export_layout.h"

#include <algorithm>
#include <cstdio>

namespace ddp::kineto_export {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;
// A rank whose pid the manifest does not say: far above any GPU index, so its threads never share a GPU's pid.
constexpr int64_t kPidWithoutManifest = 1'000'000;

std::string text_at(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// versions.cuda {"device", "compute_capability": "8.0", "device_memory_bytes"} of a GPU run.
std::optional<GpuFacts> gpu_facts(const nlohmann::json& manifest) {
  if (!manifest.is_object() || !manifest.contains("versions")) return std::nullopt;
  const nlohmann::json& v = manifest["versions"];
  if (!v.is_object() || !v.contains("cuda") || !v["cuda"].is_object()) return std::nullopt;
  const nlohmann::json& c = v["cuda"];
  GpuFacts g;
  g.name = text_at(c, "device");
  if (g.name.empty()) return std::nullopt;
  const std::string cc = text_at(c, "compute_capability");
  if (std::sscanf(cc.c_str(), "%d.%d", &g.cc_major, &g.cc_minor) != 2) g.cc_major = g.cc_minor = 0;
  if (auto m = c.find("device_memory_bytes"); m != c.end() && m->is_number_unsigned())
    g.total_bytes = m->get<uint64_t>();
  return g;
}

std::vector<std::pair<uint32_t, int64_t>> rank_pids(const nlohmann::json& manifest) {
  std::vector<std::pair<uint32_t, int64_t>> out;
  if (!manifest.is_object() || !manifest.contains("ranks") || !manifest["ranks"].is_array()) return out;
  for (const nlohmann::json& r : manifest["ranks"])
    if (r.is_object() && r.contains("rank") && r["rank"].is_number_unsigned() && r.contains("pid") &&
        r["pid"].is_number_integer())
      out.emplace_back(r["rank"].get<uint32_t>(), r["pid"].get<int64_t>());
  return out;
}

// "gpu<D>/stream<S>", the profiler's name for a GPU stream's lane (profiler/activity_naming.cpp).
bool parse_gpu_lane(const std::string& name, uint32_t& device, uint32_t& stream) {
  unsigned d = 0, s = 0;
  int used = 0;
  if (std::sscanf(name.c_str(), "gpu%u/stream%u%n", &d, &s, &used) != 2 || used != static_cast<int>(name.size()))
    return false;
  device = d, stream = s;
  return true;
}

}  // namespace

std::string RunFacts::host(const RankTrace& r) const {
  auto it = r.meta.find("host");
  return it == r.meta.end() ? std::string() : it->second;
}

int64_t RunFacts::pid(uint32_t rank) const {
  for (const auto& [r, p] : pids)
    if (r == rank && p > 0) return p;
  return kPidWithoutManifest + rank;
}

RunFacts run_facts(const RunTrace& run) {
  RunFacts f;
  f.dir = run.dir;
  const nlohmann::json& m = run.manifest;
  if (m.is_object()) {
    if (std::string b = text_at(m, "backend"); !b.empty()) f.backend = b;
    if (m.contains("config") && m["config"].is_object())
      if (std::string o = text_at(m["config"], "optimizer"); !o.empty()) f.optimizer = o;
    if (m.contains("world_size") && m["world_size"].is_number_unsigned()) f.world = m["world_size"].get<uint32_t>();
  }
  for (const RankTrace& r : run.ranks) f.world = std::max({f.world, r.world, r.rank + 1});
  if (f.world > kMaxWorldSize) {  // a damaged manifest or header: the ranks present are what is known
    f.world = 0;
    for (const RankTrace& r : run.ranks) f.world = std::max(f.world, r.rank + 1);
  }
  f.gpu = gpu_facts(m);
  f.backend_config = (f.backend == "nccl" ? "cuda:" : "cpu:") + f.backend;
  f.group_ranks = "[";
  for (uint32_t i = 0; i < f.world; ++i) f.group_ranks += (i ? ", " : "") + std::to_string(i);
  f.group_ranks += "]";
  f.pids = rank_pids(m);
  const int64_t start_unix = run.ranks.empty() ? 0 : run.ranks.front().created_unix_ns;
  f.base_ns = start_unix > 0 ? start_unix / kNanosPerSecond * kNanosPerSecond : 0;
  f.ts_shift_ns = (start_unix > 0 ? start_unix - f.base_ns : 0) - run.origin_ns();
  return f;
}

RankLayout rank_layout(const RunFacts& run, const RankTrace& r) {
  RankLayout l;
  l.pid = run.pid(r.rank);
  std::vector<char> has_gpu_work(r.lanes.size() + 1, 0);
  for (const Event& e : r.events)
    if (e.is_span() && is_gpu_activity(e.stage_id())) has_gpu_work[std::min<size_t>(e.lane, r.lanes.size())] = 1;
  for (size_t lane = 0; lane <= r.lanes.size(); ++lane) {
    const std::string& name = lane < r.lanes.size() ? r.lanes[lane] : r.lane_name(static_cast<uint8_t>(lane));
    Thread t;
    t.gpu = parse_gpu_lane(name, t.device, t.stream);
    if (!t.gpu && has_gpu_work[lane]) {  // a GPU lane under another name: device 0, one stream per lane
      t.gpu = true;
      t.stream = static_cast<uint32_t>(lane);
    }
    if (t.gpu) {
      t.pid = t.device;
      t.tid = t.stream;
      t.name = "stream " + std::to_string(t.stream);
      if (std::find(l.devices.begin(), l.devices.end(), t.device) == l.devices.end()) l.devices.push_back(t.device);
    } else {
      t.pid = l.pid;
      t.tid = l.pid + static_cast<int64_t>(lane);  // lane 0, the main thread, gets the process id as Linux does
      t.name = "thread " + std::to_string(t.tid) + " (" + name + ")";
    }
    l.threads.push_back(std::move(t));
  }
  std::sort(l.devices.begin(), l.devices.end());
  return l;
}

HostName host_name(const Event& e, const RunFacts& run) {
  const Stage s = e.stage_id();
  switch (s) {
    case Stage::step:
      return {"ProfilerStep#" + std::to_string(e.step), "user_annotation"};
    case Stage::wait_data:
      return {"enumerate(DataLoader)#ddp_profile::Loader.__next__", "user_annotation"};
    case Stage::forward:
      return {"DistributedDataParallel.forward", "user_annotation"};
    case Stage::backward:
      return {"## backward ##", "user_annotation"};
    case Stage::optimizer:
      return {"Optimizer.step#" + run.optimizer + ".step", "user_annotation"};
    default:
      return {"ddp_profile::" + std::string(stage_name(s)), "cpu_op"};
  }
}

CommSize comm_size(uint64_t bytes) {
  if (bytes % 4 == 0) return {bytes / 4, "Float"};
  return {bytes, "Byte"};
}

}  // namespace ddp::kineto_export
