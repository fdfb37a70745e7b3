#pragma once
// Where a span's wall time went on its thread: on a CPU, runnable but waiting for a core (a run queue), and the rest
// blocked (I/O, sleep, a lock, a queue, a peer). The recorder reads the thread's CPU time and run-queue wait at the
// span's two ends (profiler/thread_cpu.h; the companion's python/ddp_profile/thread_cpu.py) and writes an
// EventKind::cpu event right after the span on its lane; every reader folds those events into RankTrace::cpu.
#include <cstdint>
#include <vector>

#include "traces/model/event.h"

namespace ddp {

// A cpu event's `item` when the kernel keeps no run-queue statistics (no /proc/<tid>/schedstat): CPU time only.
inline constexpr uint32_t kWaitUnknown = 0xFFFFFFFFu;
// The trace's meta saying, once, where the waits come from (or that the kernel reports none).
inline constexpr const char* kRunQueueWaitMeta = "run_queue_wait";
inline constexpr const char* kRunQueueWaitSchedstat = "schedstat";
inline constexpr const char* kRunQueueWaitAbsent =
    "not reported by this kernel (no /proc/thread-self/schedstat): spans carry their CPU time only";

// One span's split, in microseconds (a span's CPU and wait to the microsecond; 71 minutes fit).
struct SpanCpu {
  uint32_t event = 0;    // the span's index in RankTrace::events
  uint32_t cpu_us = 0;   // on a CPU
  uint32_t wait_us = 0;  // runnable, waiting for a core; kWaitUnknown when not known
  bool wait_known() const { return wait_us != kWaitUnknown; }
};
static_assert(sizeof(SpanCpu) == 12, "a span's split is kept beside millions of spans");

// The split's parts as the exports name them, in each span's args (microseconds, the unit of a trace's durations):
// on a CPU, runnable and waiting for a core, and the rest of the span's wall time, blocked.
inline constexpr const char* kOnCpuArg = "on_cpu_us";
inline constexpr const char* kWaitingForCpuArg = "waiting_for_cpu_us";
inline constexpr const char* kBlockedArg = "blocked_us";
// The span's wall time neither on a CPU nor waiting for one (I/O, sleep, a lock, a queue), never below 0.
uint32_t blocked_us(const SpanCpu& c, int64_t wall_ns);

// Walks a rank's splits alongside its events, in index order: `at(i)` for i = 0, 1, 2, ...
class SpanCpuCursor {
 public:
  explicit SpanCpuCursor(const std::vector<SpanCpu>& cpu) : it_(cpu.begin()), end_(cpu.end()) {}
  const SpanCpu* at(size_t index) {
    while (it_ != end_ && it_->event < index) ++it_;
    return it_ != end_ && it_->event == index ? &*it_ : nullptr;
  }

 private:
  std::vector<SpanCpu>::const_iterator it_, end_;
};

// The cpu event of `span`: `cpu_ns` on a CPU, `wait_ns` waiting for one (negative: not known).
Event cpu_event(const Event& span, uint64_t cpu_ns, int64_t wait_ns);
// The split a cpu event holds, for the span at `index`.
SpanCpu split_of(const Event& cpu, uint32_t index);
// The cpu event of a split, for a writer (the span it belongs to gives the times and the context).
Event cpu_event(const Event& span, const SpanCpu& split);

// Takes the cpu events out of `events` (in the order they were written: each right after its span on its lane) and
// returns each one's split against the index its span has in what is left, sorted by that index. A cpu event whose
// span is not the last event of its lane before it (its span was dropped) is dropped too.
std::vector<SpanCpu> take_cpu_events(std::vector<Event>& events);

}  // namespace ddp
