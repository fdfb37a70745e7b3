#include "profiler/activity_naming.h"

#include <cxxabi.h>

#include <cstdlib>

namespace ddp::prof {

const char* mem_kind_name(MemKind k) {
  switch (k) {
    case MemKind::pageable:
      return "pageable";
    case MemKind::pinned:
      return "pinned";
    case MemKind::device:
      return "device";
    case MemKind::array:
      return "array";
    case MemKind::managed:
      return "managed";
    default:
      return "unknown";
  }
}

const char* sync_kind_name(SyncKind k) {
  switch (k) {
    case SyncKind::event_synchronize:
      return "cudaEventSynchronize";
    case SyncKind::stream_wait_event:
      return "cudaStreamWaitEvent";
    case SyncKind::stream_synchronize:
      return "cudaStreamSynchronize";
    case SyncKind::context_synchronize:
      return "cudaDeviceSynchronize";
    default:
      return "synchronize";
  }
}

Stage stage_for(const ActivityRecord& r) {
  switch (r.kind) {
    // CUPTI gives the mangled name, and NCCL's kernels are C++ ("_Z29ncclDevKernel_AllReduce..."): no prefix test.
    case ActivityKind::kernel:
      return r.name.find("nccl") != std::string::npos ? Stage::nccl : Stage::kernel;
    case ActivityKind::memset:
      return Stage::memset;
    case ActivityKind::sync:
      return Stage::sync;
    case ActivityKind::runtime_api:
    case ActivityKind::driver_api:
      return Stage::cuda_api;
    case ActivityKind::memcpy: {
      auto host = [](MemKind k) { return k == MemKind::pageable || k == MemKind::pinned; };
      if (r.peer) return Stage::memcpy_d2d;
      if (host(r.src) && !host(r.dst)) return Stage::memcpy_h2d;
      if (!host(r.src) && host(r.dst)) return Stage::memcpy_d2h;
      if (host(r.src) && host(r.dst)) return Stage::memcpy_h2d;  // host-to-host through the driver: rare
      return Stage::memcpy_d2d;
    }
  }
  return Stage::kernel;
}

std::string gpu_lane_name(uint32_t device, uint32_t stream) {
  return "gpu" + std::to_string(device) + "/stream" + std::to_string(stream);
}

namespace {
std::string demangle(std::string_view name) {
  if (name.rfind("_Z", 0) != 0) return std::string(name);
  std::string z(name);
  int status = 0;
  char* d = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? std::string(d) : z;
  std::free(d);
  return out;
}

const char* copy_dir(const ActivityRecord& r) {
  switch (stage_for(r)) {
    case Stage::memcpy_h2d:
      return r.dst == MemKind::pageable || r.dst == MemKind::pinned ? "HtoH" : "HtoD";
    case Stage::memcpy_d2h:
      return "DtoH";
    default:
      return r.peer ? "PtoP" : "DtoD";
  }
}
}  // namespace

std::string display_name(const ActivityRecord& r) {
  constexpr size_t kMaxName = 1000;
  std::string s;
  switch (r.kind) {
    case ActivityKind::memcpy:
      s = std::string("memcpy ") + copy_dir(r) + " " + mem_kind_name(r.src) + "->" + mem_kind_name(r.dst);
      break;
    case ActivityKind::memset:
      s = std::string("memset ") + mem_kind_name(r.dst);
      break;
    case ActivityKind::sync:
      s = r.name.empty() ? sync_kind_name(r.sync) : std::string(r.name);
      break;
    default:
      s = r.name.empty() ? std::string(stage_name(stage_for(r))) : demangle(r.name);
  }
  if (s.size() > kMaxName) s.resize(kMaxName);
  return s;
}

}  // namespace ddp::prof
