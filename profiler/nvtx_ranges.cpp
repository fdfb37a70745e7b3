#include "profiler/nvtx_ranges.h"

#if DDP_PROFILE_NVTX
#include <array>
#include <cstdlib>
#include <string>

namespace ddp::prof {

const bool g_nvtx_tool_attached = std::getenv("NVTX_INJECTION64_PATH") != nullptr;

// The domain and one registered string per stage are created once, on first use (function-local statics are
// thread-safe); after that a push costs one nvtxDomainRangePushEx, which is a no-op until a tool (Nsight Systems)
// injects itself.
nvtxDomainHandle_t nvtx_domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("ddp_profile");
  return d;
}

nvtxStringHandle_t nvtx_stage_string(Stage s) {
  static const std::array<nvtxStringHandle_t, kStageCount> strings = [] {
    std::array<nvtxStringHandle_t, kStageCount> a{};
    for (int i = 0; i < kStageCount; ++i)
      a[i] = nvtxDomainRegisterStringA(nvtx_domain(), std::string(stage_name(static_cast<Stage>(i))).c_str());
    return a;
  }();
  auto i = static_cast<size_t>(s);
  return i < strings.size() ? strings[i] : nullptr;
}

}  // namespace ddp::prof
#endif
