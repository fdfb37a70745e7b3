#include "traces/kineto/kineto_export_layout.h"

#include <algorithm>
#include <cstdio>

namespace ddp::kineto_export {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;
// A rank whose pid the manifest does not say: far above any GPU index, so its threads never share a GPU's pid.
constexpr int64_t kPidWithoutManifest = 1'000'000;

// versions.cuda of a GPU run of our job (records.def's cuda_versions; a user's is a string, with no device facts).
std::optional<GpuFacts> gpu_facts(const RunTrace& run) {
  if (!run.manifest || !run.manifest->fields.versions || !run.manifest->fields.versions->cuda) return std::nullopt;
  const nlohmann::json& cuda = *run.manifest->fields.versions->cuda;
  records::cuda_versions c;
  std::string why;
  if (!cuda.is_object() || !records::read(cuda, c, why) || !c.device || c.device->empty()) return std::nullopt;
  GpuFacts g;
  g.name = *c.device;
  const std::string cc = c.compute_capability.value_or("");
  if (std::sscanf(cc.c_str(), "%d.%d", &g.cc_major, &g.cc_minor) != 2) g.cc_major = g.cc_minor = 0;
  if (c.device_memory_bytes) g.total_bytes = *c.device_memory_bytes;
  return g;
}

std::vector<std::pair<uint32_t, int64_t>> rank_pids(const RunTrace& run) {
  std::vector<std::pair<uint32_t, int64_t>> out;
  if (!run.manifest || !run.manifest->fields.ranks) return out;
  for (const records::manifest_rank& r : *run.manifest->fields.ranks)
    if (r.rank >= 0) out.emplace_back(static_cast<uint32_t>(r.rank), r.pid);
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
  if (run.manifest && run.manifest->fields.backend && !run.manifest->fields.backend->empty())
    f.backend = *run.manifest->fields.backend;
  if (const records::job_config* job = run.job(); job && !job->optimizer.empty()) f.optimizer = job->optimizer;
  f.world = run.world_size();
  f.gpu = gpu_facts(run);
  f.backend_config = (f.backend == "nccl" ? "cuda:" : "cpu:") + f.backend;
  f.group_ranks = "[";
  for (uint32_t i = 0; i < f.world; ++i) f.group_ranks += (i ? ", " : "") + std::to_string(i);
  f.group_ranks += "]";
  f.pids = rank_pids(run);
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
