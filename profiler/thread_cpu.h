#pragma once
// The calling thread's time on a CPU and its time runnable but waiting for one, read at a span's two ends so the span
// can say where its wall time went (traces/model/span_cpu.h). CPU time is CLOCK_THREAD_CPUTIME_ID (the kernel adds the
// running slice, so it is exact at any moment); the wait is /proc/thread-self/schedstat's run_delay, which the
// kernel adds each time the thread gets a CPU, so it is exact whenever the reading thread is the one running. A
// kernel that keeps no schedstat (CONFIG_SCHED_INFO off) gives CPU only: wait_ns is -1 and the recorder says so once
// (the trace's meta "run_queue_wait"). Each read costs ~0.5 us (measured on this project's 2-vCPU machine: 0.19 us
// the clock, 0.31 us the pread), two per span.
#include <cstdint>

namespace ddp::prof {

struct CpuMark {
  int64_t cpu_ns = 0;
  int64_t wait_ns = -1;  // -1: not known (no schedstat)
};

// A mark asked for within this many ticks (ticks(), profiler/clock.h: ns, or TSC cycles at >= 1 GHz, so at most 4 us)
// after the calling thread's previous one is that one again. Adjacent spans share a boundary (one ends, the next
// starts, or a span opens inside one that just opened) tens of ns apart, and a read costs ~0.5 us: our default step's
// spans cost 1.3 us each with two reads apiece, its recording 1.07x the step; what the reuse misplaces is at most
// this much of a thread's CPU, between two spans that touch.
inline constexpr uint64_t kCpuMarkReuseTicks = 4000;

// The calling thread's mark at `now` (its ticks()). Keeps one file descriptor per thread open (closed when the thread
// ends).
CpuMark cpu_mark(uint64_t now);

// Whether this kernel reports run-queue waits (read once).
bool run_queue_wait_known();

}  // namespace ddp::prof
