#include "traces/model/cuda_names.h"

#include <charconv>

namespace ddp {

std::vector<std::string> cuda_event_names(const RankTrace& rank) {
  std::vector<std::string> names;
  constexpr std::string_view kPrefix = "gpu_name/";
  for (auto it = rank.meta.lower_bound(std::string(kPrefix)); it != rank.meta.end(); ++it) {
    if (it->first.compare(0, kPrefix.size(), kPrefix) != 0) break;
    uint32_t id = 0;
    const char* b = it->first.data() + kPrefix.size();
    const char* e = it->first.data() + it->first.size();
    auto res = std::from_chars(b, e, id);
    if (res.ec != std::errc() || res.ptr != e || id >= kNoName) continue;
    if (names.size() <= id) names.resize(id + 1);
    names[id] = it->second;
  }
  return names;
}

std::string_view cuda_event_name(const Event& e, const std::vector<std::string>& names) {
  const uint16_t id = e.name_id();
  if (id < names.size() && !names[id].empty()) return names[id];
  return stage_name(e.stage_id());
}

std::string_view cuda_category(Stage s) {
  switch (s) {
    case Stage::kernel:
    case Stage::nccl:
      return "kernel";
    case Stage::memcpy_h2d:
    case Stage::memcpy_d2h:
    case Stage::memcpy_d2d:
      return "gpu_memcpy";
    case Stage::memset:
      return "gpu_memset";
    case Stage::sync:
      return "cuda_sync";
    default:
      return "cuda_runtime";
  }
}

CudaLaunches cuda_launches(const RankTrace& rank) {
  CudaLaunches launches;
  for (const Event& e : rank.events)
    if (e.is_span() && e.stage_id() == Stage::cuda_api && e.correlation_id()) launches.emplace(e.correlation_id(), &e);
  return launches;
}

}  // namespace ddp
