#pragma once
// The one stage vocabulary. Runtime emits these, the profiler records them, the analysis reasons about them and the
// viewer colours them. Every stage is one row of traces/model/stages.def (id, name, colour, kinds); the enum, the name
// and colour lookups and the kind queries below are generated from it. Adding a stage means adding a row there and
// nowhere else.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddp {

// What kind of work a stage is. A stage has several; every subset the code picks is one of these, so a new stage
// joins the right subsets by the flags on its row.
enum StageFlag : uint32_t {
  kStageHost = 1u << 0,          // a pipeline stage the runtime records on a host thread (not CUPTI)
  kStageGpuActivity = 1u << 1,   // work that runs on the GPU (CUPTI kernel/memcpy/memset records), on gpu lanes
  kStageCudaHost = 1u << 2,      // host-side CUDA activity recorded by CUPTI (API calls, synchronisation waits)
  kStageWait = 1u << 3,          // a consumer waiting for a producer: the stalls
  kStageDataPath = 1u << 4,      // the input pipeline: disk -> host -> pinned buffer -> device
  kStageLoaderThread = 1u << 5,  // runs on the loader's worker threads (the data path before the copy to the device)
  kStageMainThread = 1u << 6,    // runs on a rank's main (compute) thread
  // Main-thread time that can make a rank late for the next collective. On a GPU, forward/backward/optimizer time the
  // host's launches; the GPU's own time surfaces where the host reads a value back (wait_gpu). wait_comm is not one:
  // it is the waiting for the collective itself.
  kStageDelaysCollective = 1u << 7,
  kStageCommunication = 1u << 8,  // the collective itself (the host's allreduce span, NCCL kernels)
  kStageBookkeeping = 1u << 9,    // the step's extent and checkpoints: not training work
  kStageSlowable = 1u << 10,      // `--slow rank=R,stage=S,ms=M` can slow it down (the runtime sleeps inside it)
  // Where a rank's main thread blocks when a peer stops: in the collective (Gloo), or on NCCL, whose waits do not
  // block the host, at the next read-back of a GPU value that depends on it. The supervisor's hang report uses it.
  kStageBlocksOnPeers = 1u << 11,
};

enum class Stage : uint8_t {
#define DDP_STAGE(name, id, colour, flags) name,
#include "traces/model/stages.def"
  count_  // not a stage
};
inline constexpr int kStageCount = static_cast<int>(Stage::count_);

// Counters sampled over time (not spans).
enum class Counter : uint8_t {
#define DDP_COUNTER(name, id) name,
#include "traces/model/stages.def"
  count_
};
inline constexpr int kCounterCount = static_cast<int>(Counter::count_);

// Ids are on disk: a row inserted, moved or removed in stages.def fails here instead of renumbering every trace.
#define DDP_STAGE(name, id, colour, flags) \
  static_assert(static_cast<int>(Stage::name) == (id), "stage ids are on disk: append rows to stages.def only");
#define DDP_COUNTER(name, id) \
  static_assert(static_cast<int>(Counter::name) == (id), "counter ids are on disk: append rows to stages.def only");
#include "traces/model/stages.def"

namespace stage_table {
struct StageRow {
  std::string_view name;
  uint32_t color;  // 0xAABBGGRR
  uint32_t flags;  // StageFlag bits
};
inline constexpr StageRow kStages[] = {
#define DDP_STAGE(name, id, colour, flags) {#name, colour, static_cast<uint32_t>(flags)},
#include "traces/model/stages.def"
};
inline constexpr std::string_view kCounters[] = {
#define DDP_COUNTER(name, id) #name,
#include "traces/model/stages.def"
};
static_assert(std::size(kStages) == kStageCount, "one stages.def row per Stage");
static_assert(std::size(kCounters) == kCounterCount, "one stages.def row per Counter");
}  // namespace stage_table

// "unknown" for a value outside the table (a damaged or newer trace).
constexpr std::string_view stage_name(Stage s) {
  auto i = static_cast<size_t>(s);
  return i < std::size(stage_table::kStages) ? stage_table::kStages[i].name : std::string_view("unknown");
}
std::optional<Stage> stage_from_name(std::string_view name);
constexpr std::string_view counter_name(Counter c) {
  auto i = static_cast<size_t>(c);
  return i < std::size(stage_table::kCounters) ? stage_table::kCounters[i] : std::string_view("unknown");
}
std::optional<Counter> counter_from_name(std::string_view name);

// One RGBA colour per stage (0xAABBGGRR, ImGui's packing), so every view paints a stage the same way; opaque white
// for a value outside the table.
constexpr uint32_t stage_color(Stage s) {
  auto i = static_cast<size_t>(s);
  return i < std::size(stage_table::kStages) ? stage_table::kStages[i].color : 0xFFFFFFFFu;
}

// The three parts of a span's wall time on its thread (traces/model/span_cpu.h), kept here beside the stage colours
// so that every view paints them the same way: on a CPU in green, runnable but waiting for a core in magenta (hot:
// the host has too few cores), blocked in grey (not running). They are drawn as a strip over a span's own stage
// colour, so they are apart from each other and from every stage colour (stages.def), and opaque (0xAABBGGRR).
enum class CpuPart : uint8_t { on_cpu, waiting_for_core, blocked };
inline constexpr size_t kCpuPartCount = 3;
constexpr uint32_t cpu_part_color(CpuPart p) {
  constexpr uint32_t kColors[kCpuPartCount] = {0xFF5ADC3Cu, 0xFFC83CFFu, 0xFFA59696u};
  return kColors[static_cast<size_t>(p) % kCpuPartCount];
}
constexpr bool cpu_part_colors_stand_out() {
  for (size_t p = 0; p < kCpuPartCount; ++p) {
    for (size_t q = 0; q < p; ++q)
      if (cpu_part_color(static_cast<CpuPart>(p)) == cpu_part_color(static_cast<CpuPart>(q))) return false;
    for (const auto& row : stage_table::kStages)
      if (row.color == cpu_part_color(static_cast<CpuPart>(p))) return false;
  }
  return true;
}
static_assert(cpu_part_colors_stand_out(), "a CPU part's colour must differ from the others' and every stage's");
constexpr std::string_view cpu_part_name(CpuPart p) {
  constexpr std::string_view kNames[kCpuPartCount] = {"on CPU", "waiting for a core", "blocked"};
  return kNames[static_cast<size_t>(p) % kCpuPartCount];
}

// The StageFlag bits of a stage; 0 for a value outside the table.
constexpr uint32_t stage_flags(Stage s) {
  auto i = static_cast<size_t>(s);
  return i < std::size(stage_table::kStages) ? stage_table::kStages[i].flags : 0u;
}
// True when the stage has the kind `f` (one flag).
constexpr bool stage_has(Stage s, StageFlag f) { return (stage_flags(s) & f) != 0; }

constexpr size_t count_stages_with(StageFlag f) {
  size_t n = 0;
  for (const auto& row : stage_table::kStages) n += (row.flags & f) != 0;
  return n;
}
// Every stage of kind `F`, in id order, as a compile-time array: `for (Stage s : stages_with<kStageWait>())`.
template <StageFlag F>
constexpr std::array<Stage, count_stages_with(F)> stages_with() {
  std::array<Stage, count_stages_with(F)> out{};
  size_t n = 0;
  for (int i = 0; i < kStageCount; ++i)
    if (stage_has(static_cast<Stage>(i), F)) out[n++] = static_cast<Stage>(i);
  return out;
}
// The names of the stages of kind `f`, in id order, joined by ", " (for usage messages).
std::string stage_names_with(StageFlag f);

// The subsets by their older names (callers in traces/, profiler/, runtime/ and viewer/ use these).
constexpr bool is_wait(Stage s) { return stage_has(s, kStageWait); }
constexpr bool is_data_stage(Stage s) { return stage_has(s, kStageDataPath); }
constexpr bool is_gpu_activity(Stage s) { return stage_has(s, kStageGpuActivity); }
constexpr bool is_cuda_host(Stage s) { return stage_has(s, kStageCudaHost); }

}  // namespace ddp
