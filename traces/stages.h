#pragma once
// The one stage vocabulary. Runtime emits these, the profiler records them, the analysis reasons about them and the
// viewer colours them. Adding a stage means adding it here and nowhere else.
#include <cstdint>
#include <optional>
#include <string_view>

namespace ddp {

enum class Stage : uint8_t {
  // host/CPU pipeline stages
  disk_read,
  transform,
  pin,
  h2d,
  wait_data,
  forward,
  backward,
  allreduce,
  wait_comm,
  optimizer,
  checkpoint,
  step,
  // GPU activity kinds (CUPTI)
  kernel,
  memcpy_h2d,
  memcpy_d2h,
  memset,
  nccl,
  // appended later (ids are on disk: never reorder, only append)
  cuda_api,    // a CUDA runtime/driver API call on a host thread (CUPTI RUNTIME/DRIVER records)
  sync,        // a host thread blocked in a CUDA synchronisation (stream/event/device/context synchronize)
  memcpy_d2d,  // device-to-device or peer copy
  wait_gpu,    // the main thread waits for the GPU to finish work it queued (a value read back: loss, inf flag)
  count_  // not a stage
};

inline constexpr int kStageCount = static_cast<int>(Stage::count_);

// Counters sampled over time (not spans).
enum class Counter : uint8_t {
  host_rss_bytes,
  cuda_allocated_bytes,
  cuda_reserved_bytes,
  loader_queue_depth,
  count_
};
inline constexpr int kCounterCount = static_cast<int>(Counter::count_);

std::string_view stage_name(Stage s);
std::optional<Stage> stage_from_name(std::string_view name);
std::string_view counter_name(Counter c);
std::optional<Counter> counter_from_name(std::string_view name);

// True for the stages that are waits: time a consumer spends waiting for a producer.
constexpr bool is_wait(Stage s) { return s == Stage::wait_data || s == Stage::wait_comm || s == Stage::wait_gpu; }
// True for the stages of the input pipeline (run on loader threads).
constexpr bool is_data_stage(Stage s) {
  return s == Stage::disk_read || s == Stage::transform || s == Stage::pin || s == Stage::h2d;
}
// Work that runs on the GPU (CUPTI kernel/memcpy/memset records), drawn on "gpu<D>/stream<S>" lanes.
constexpr bool is_gpu_activity(Stage s) {
  return (s >= Stage::kernel && s <= Stage::nccl) || s == Stage::memcpy_d2d;
}
// Host-side CUDA activity recorded by CUPTI (API calls, synchronisation waits).
constexpr bool is_cuda_host(Stage s) { return s == Stage::cuda_api || s == Stage::sync; }

// One RGBA colour per stage (0xAABBGGRR, ImGui's packing), so every view paints a stage the same way.
uint32_t stage_color(Stage s);

}  // namespace ddp
