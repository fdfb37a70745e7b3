#pragma once
// NVTX ranges (domain "ddp_profile") mirroring our spans, so Nsight Systems shows the same stages. Only compiled in
// CUDA builds (DDP_PROFILE_NVTX=1); elsewhere these are empty inline functions.
#include "traces/model/stages.h"

#if DDP_PROFILE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace ddp::prof {
#if DDP_PROFILE_NVTX
nvtxDomainHandle_t nvtx_domain();
nvtxStringHandle_t nvtx_stage_string(Stage s);
// True when a tool is injected (Nsight Systems/Compute set NVTX_INJECTION64_PATH): without one every range is
// discarded anyway, so spans skip building the attributes (measured: ~10 ns per span) and test one flag instead.
extern const bool g_nvtx_tool_attached;
inline void nvtx_push(Stage s) {
  if (!g_nvtx_tool_attached) return;
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  uint32_t c = stage_color(s);  // ImGui ABGR -> NVTX ARGB
  a.color = (c & 0xFF00FF00u) | ((c & 0xFF) << 16) | ((c >> 16) & 0xFF);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = nvtx_stage_string(s);
  nvtxDomainRangePushEx(nvtx_domain(), &a);
}
inline void nvtx_pop() {
  if (g_nvtx_tool_attached) nvtxDomainRangePop(nvtx_domain());
}
#else
inline void nvtx_push(Stage) {}
inline void nvtx_pop() {}
#endif
}  // namespace ddp::prof
