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

// Now, for the calling thread. Keeps one file descriptor per thread open (closed when the thread ends).
CpuMark cpu_mark();

// Whether this kernel reports run-queue waits (read once).
bool run_queue_wait_known();

}  // namespace ddp::prof
