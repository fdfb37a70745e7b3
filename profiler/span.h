#pragma once
// RAII span for one stage on the calling thread, with where its wall time went: the thread's CPU time and its wait for
// a core over the span (profiler/thread_cpu.h), written as a cpu event after it. With DDP_PROFILE_SPANS=0 it compiles
// to nothing; with recording off at run time it costs one relaxed load. NVTX ranges mirror spans in CUDA builds.
#include "profiler/nvtx_ranges.h"
#include "profiler/recorder.h"
#include "profiler/thread_cpu.h"

namespace ddp::prof {

#if DDP_PROFILE_SPANS
class Span {
 public:
  // `ctx`: the step the span belongs to when it is not the thread's (a loader thread's batch is the step's that takes
  // it); it must outlive the span.
  explicit Span(Stage stage, const StepContext* ctx = nullptr) : stage_(stage), ctx_(ctx) {
    if (recording()) {
      t0_ = ticks();
      cpu0_ = cpu_mark(t0_);
      nvtx_push(stage);
    }
  }
  ~Span() { end(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  void bytes(uint64_t v) { value_ = v; }
  void bucket(uint16_t b) { bucket_ = b; }
  void item(uint32_t i) { item_ = i; }
  // Ends the span before scope exit.
  void end() {
    if (t0_) {
      const uint64_t t1 = ticks();
      const CpuMark cpu1 = cpu_mark(t1);  // each mark just after its end's tick: the split stays inside the wall
      record_span_cpu(stage_, t0_, t1, value_, bucket_, item_, ctx_, cpu1.cpu_ns - cpu0_.cpu_ns,
                      cpu1.wait_ns < 0 || cpu0_.wait_ns < 0 ? -1 : cpu1.wait_ns - cpu0_.wait_ns);
      nvtx_pop();
      t0_ = 0;
    }
  }

 private:
  Stage stage_;
  const StepContext* ctx_;
  uint64_t t0_ = 0;
  CpuMark cpu0_;
  uint64_t value_ = 0;
  uint16_t bucket_ = kNoBucket;
  uint32_t item_ = 0;
};
#else
class Span {
 public:
  explicit Span(Stage, const StepContext* = nullptr) {}
  void bytes(uint64_t) {}
  void bucket(uint16_t) {}
  void item(uint32_t) {}
  void end() {}
};
#endif

}  // namespace ddp::prof
