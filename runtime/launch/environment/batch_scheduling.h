#pragma once
// Gloo's threads run under SCHED_BATCH: a woken thread then waits for the running one to block or use up its slice
// instead of preempting it. Gloo's event-loop thread only try-locks a pair's mutex and, when that fails, goes straight
// back to epoll_wait, which reports the same unread socket at once: if it woke up and preempted the Gloo worker
// holding that mutex on the same core, it spins until the scheduler takes the core back, a whole slice of ~3 ms.
// perf sched showed both ranks' loop threads on the CPU for 2-3 ms at a time in a quarter of the default job's
// collectives (median step 1.0 ms, mean 2.6 ms, p90 6 ms; with Gloo's threads under SCHED_BATCH 0.8 / 0.85 / 0.95 ms;
// docs/benchmarks.md). Only Gloo's threads: the loader's workers under SCHED_BATCH could no longer preempt the
// training thread, so their work moved into the collective's window (~50 us of every allreduce).
// Each rank applies it to itself, so it holds under torchrun and Slurm too; --no-batch-sched keeps the normal policy.
#include <string>

namespace ddp {

// While it lives, the calling thread runs SCHED_BATCH, so the threads it starts inherit that policy; its own normal
// policy is restored at the end. Does nothing with `enabled` false or when the thread is not under the normal policy
// (a real-time or idle policy someone chose stays). A refusal by the kernel is reported in error().
class BatchSchedulingScope {
 public:
  explicit BatchSchedulingScope(bool enabled);
  ~BatchSchedulingScope();
  BatchSchedulingScope(const BatchSchedulingScope&) = delete;
  BatchSchedulingScope& operator=(const BatchSchedulingScope&) = delete;
  const std::string& error() const { return error_; }

 private:
  bool restore_ = false;
  std::string error_;
};

// How many threads of the calling process run SCHED_BATCH, read back from the kernel (for the manifest).
int batch_scheduled_threads();

}  // namespace ddp
