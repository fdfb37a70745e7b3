#pragma once
// RAII span for one stage on the calling thread. With DDP_PROFILE_SPANS=0 it compiles to nothing; with recording
// off at run time it costs one relaxed load. NVTX ranges mirror spans in CUDA builds.
#include "profiler/nvtx_ranges.h"
#include "profiler/recorder.h"

namespace ddp::prof {

#if DDP_PROFILE_SPANS
class Span {
 public:
  explicit Span(Stage stage) : stage_(stage) {
    if (recording()) {
      t0_ = ticks();
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
      record_span(stage_, t0_, ticks(), value_, bucket_, item_);
      nvtx_pop();
      t0_ = 0;
    }
  }

 private:
  Stage stage_;
  uint64_t t0_ = 0;
  uint64_t value_ = 0;
  uint16_t bucket_ = kNoBucket;
  uint32_t item_ = 0;
};
#else
class Span {
 public:
  explicit Span(Stage) {}
  void bytes(uint64_t) {}
  void bucket(uint16_t) {}
  void item(uint32_t) {}
  void end() {}
};
#endif

}  // namespace ddp::prof
