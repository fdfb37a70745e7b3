#include "traces/stages.h"

#include <array>

namespace ddp {
namespace {
constexpr std::array<std::string_view, kStageCount> kStageNames = {
    "disk_read", "transform", "pin",       "h2d",        "wait_data",  "forward", "backward", "allreduce", "wait_comm",
    "optimizer", "checkpoint", "step",     "kernel",     "memcpy_h2d", "memcpy_d2h", "memset", "nccl",
    "cuda_api",  "sync",       "memcpy_d2d", "wait_gpu"};

constexpr std::array<std::string_view, kCounterCount> kCounterNames = {
    "host_rss_bytes", "cuda_allocated_bytes", "cuda_reserved_bytes", "loader_queue_depth"};

// Data path in blues/greens, compute in oranges, communication in purples, waits in red, bookkeeping in grey.
constexpr std::array<uint32_t, kStageCount> kStageColors = {
    0xFFB07A2E,  // disk_read  (blue)
    0xFFD6A040,  // transform
    0xFFC8C83C,  // pin        (teal)
    0xFF8CC84A,  // h2d        (green)
    0xFF3030E0,  // wait_data  (red)
    0xFF2E8CF0,  // forward    (orange)
    0xFF2060C8,  // backward   (dark orange)
    0xFFC050A0,  // allreduce  (purple)
    0xFF5050FF,  // wait_comm  (light red)
    0xFF40C0E8,  // optimizer  (yellow)
    0xFF909090,  // checkpoint (grey)
    0xFF505050,  // step       (dark grey)
    0xFF68B868,  // kernel
    0xFF98D878,  // memcpy_h2d
    0xFF78A8D8,  // memcpy_d2h
    0xFFA0A0A0,  // memset
    0xFFE070C0,  // nccl
    0xFFB4B4B4,  // cuda_api   (light grey)
    0xFF4040B0,  // sync       (dark red: the host waits for the GPU)
    0xFFD8B878,  // memcpy_d2d
    0xFF2848A8,  // wait_gpu   (brown-red: the rank waits for its own GPU)
};
}  // namespace

std::string_view stage_name(Stage s) {
  auto i = static_cast<size_t>(s);
  return i < kStageNames.size() ? kStageNames[i] : std::string_view("unknown");
}

std::optional<Stage> stage_from_name(std::string_view name) {
  for (size_t i = 0; i < kStageNames.size(); ++i)
    if (kStageNames[i] == name) return static_cast<Stage>(i);
  return std::nullopt;
}

std::string_view counter_name(Counter c) {
  auto i = static_cast<size_t>(c);
  return i < kCounterNames.size() ? kCounterNames[i] : std::string_view("unknown");
}

std::optional<Counter> counter_from_name(std::string_view name) {
  for (size_t i = 0; i < kCounterNames.size(); ++i)
    if (kCounterNames[i] == name) return static_cast<Counter>(i);
  return std::nullopt;
}

uint32_t stage_color(Stage s) {
  auto i = static_cast<size_t>(s);
  return i < kStageColors.size() ? kStageColors[i] : 0xFFFFFFFF;
}

}  // namespace ddp
