#include "traces/kineto/kineto_map.h"

#include <charconv>

namespace ddp {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

KinetoMatch match(Stage s, CollectiveSource c = CollectiveSource::none) {
  KinetoMatch m;
  m.stage = s;
  m.collective = c;
  return m;
}

// GPU activity and CUDA API records, by Kineto's category.
std::optional<KinetoMatch> classify_cuda(std::string_view name, std::string_view cat) {
  if (cat == "kernel") {
    // NCCL kernels: ncclKernel_AllReduce_..., ncclAllReduceRingLLKernel_... (older), ncclDevKernel_... (NCCL >= 2.19)
    if (starts_with(name, "ncclDevKernel_") || (starts_with(name, "nccl") && contains(name, "Kernel")))
      return match(Stage::nccl);
    return match(Stage::kernel);
  }
  if (cat == "gpu_memcpy") {
    if (contains(name, "HtoD")) return match(Stage::memcpy_h2d);
    if (contains(name, "DtoH")) return match(Stage::memcpy_d2h);
    if (contains(name, "DtoD") || contains(name, "PtoP")) return match(Stage::memcpy_d2d);
    return std::nullopt;
  }
  if (cat == "gpu_memset") return match(Stage::memset);
  if (cat == "cuda_sync") return match(Stage::sync);
  if (cat == "cuda_runtime" || cat == "cuda_driver") {
    if (starts_with(name, "cuda") && ends_with(name, "Synchronize")) return match(Stage::sync);
    return match(Stage::cuda_api);  // kept so each GPU record keeps the launch it came from (flows)
  }
  return std::nullopt;
}

bool is_allreduce_name(std::string_view c) {
  return c == "allreduce" || c == "all_reduce" || c == "allreduce_coalesced" || c == "all_reduce_coalesced";
}

// Host-side events (cpu_op, user_annotation, python_function, ...).
std::optional<KinetoMatch> classify_host(std::string_view name, std::string_view collective_name) {
  uint32_t step = 0;
  if (parse_profiler_step(name, step)) return match(Stage::step);
  if (starts_with(name, "enumerate(DataLoader)#") && ends_with(name, "__next__")) return match(Stage::wait_data);
  if (name == "DistributedDataParallel.forward" || name == "## forward ##") return match(Stage::forward);
  if (starts_with(name, "autograd::engine::evaluate_function: ") || name == "## backward ##")
    return match(Stage::backward);
  if (starts_with(name, "Optimizer.step#") || starts_with(name, "Optimizer.zero_grad#")) return match(Stage::optimizer);
  if (starts_with(name, "gloo:all_reduce") || starts_with(name, "nccl:all_reduce"))
    return match(Stage::allreduce, CollectiveSource::backend);
  if (name == "record_param_comms" && is_allreduce_name(collective_name))
    return match(Stage::allreduce, CollectiveSource::param_comms);
  if (starts_with(name, "c10d::allreduce")) return match(Stage::allreduce, CollectiveSource::dispatcher);
  return std::nullopt;
}

}  // namespace

bool KinetoStageMap::add_user_rule(const std::string& spec, std::string& error) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    error = "--map needs REGEX=STAGE, got '" + spec + "'";
    return false;
  }
  const std::string text = spec.substr(0, eq), stage = spec.substr(eq + 1);
  auto s = stage_from_name(stage);
  if (!s) {
    error = "--map " + spec + ": unknown stage '" + stage + "' (stages: " + stage_names_with(kStageHost) + ", " +
            stage_names_with(kStageGpuActivity) + ", " + stage_names_with(kStageCudaHost) + ")";
    return false;
  }
  try {
    user_.push_back({text, std::regex(text, std::regex::ECMAScript), *s});
  } catch (const std::regex_error& e) {
    error = "--map " + spec + ": bad regular expression '" + text + "': " + e.what();
    return false;
  }
  cache_.clear();
  return true;
}

std::optional<KinetoMatch> KinetoStageMap::classify(std::string_view name, std::string_view cat,
                                                    std::string_view collective_name) const {
  // The GPU copy of a host annotation (same name on a GPU stream) is not the host's stage.
  if (cat == "gpu_user_annotation") return std::nullopt;
  std::string& key = key_;  // reused: one lookup per event, no allocation once it is big enough
  key.clear();
  key.append(name).push_back('\x1f');
  key.append(cat).push_back('\x1f');
  key.append(collective_name);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::optional<KinetoMatch> m;
  for (const UserRule& r : user_)
    if (std::regex_search(name.begin(), name.end(), r.re)) {
      m = match(r.stage, r.stage == Stage::allreduce ? CollectiveSource::backend : CollectiveSource::none);
      m->user = true;
      break;
    }
  if (!m) m = classify_cuda(name, cat);
  if (!m) m = classify_host(name, collective_name);
  cache_.emplace(key, m);
  return m;
}

bool parse_profiler_step(std::string_view name, uint32_t& step) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!starts_with(name, kPrefix) || name.size() == kPrefix.size()) return false;
  const char* b = name.data() + kPrefix.size();
  const char* e = name.data() + name.size();
  auto r = std::from_chars(b, e, step);
  return r.ec == std::errc() && r.ptr == e;
}

uint32_t dtype_bytes(std::string_view d) {
  if (d == "Float" || d == "Int" || d == "float" || d == "int") return 4;
  if (d == "Double" || d == "Long" || d == "ComplexFloat" || d == "double" || d == "long") return 8;
  if (d == "Half" || d == "BFloat16" || d == "Short") return 2;
  if (d == "Byte" || d == "Char" || d == "Bool" || d == "Float8_e4m3fn" || d == "Float8_e5m2") return 1;
  if (d == "ComplexDouble") return 16;
  return 0;
}

}  // namespace ddp
