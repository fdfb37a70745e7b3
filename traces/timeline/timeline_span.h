#pragma once
// One span of the viewer's timeline (traces/timeline/timeline.h), in a header of its own so that the staging of
// spans (staged_spans.h) needs nothing else.
#include <algorithm>
#include <cstdint>

#include "traces/model/event.h"

namespace ddp {

inline constexpr uint8_t kNoStage = 0xFF;
inline constexpr uint32_t kNoStep = 0xFFFFFF;  // a span's step is 24 bits: 16.7 M steps

// What some spans carry beyond their times and names: bytes moved, the gradient bucket (our runs' allreduces, copies
// and reads; Kineto collectives), epoch and micro-batch (our runs' spans after the first epoch or micro-batch), with
// the span's args text. Kept apart so that a span is 24 bytes.
struct SpanDetail {
  uint64_t bytes = 0;
  uint32_t text = 0;  // ExtraTexts id; 0 = none
  uint16_t bucket = kNoBucket;
  uint16_t epoch = 0;
  uint8_t micro = 0;
};

// Where a span's wall time went on its thread (traces/model/span_cpu.h), for the spans that carry a split: kept apart
// and only for those (Span::detail then points here, and this keeps the span's own detail), so that a trace without
// splits costs nothing and one with them 12 bytes per span that has one.
struct SpanCpuSplit {
  uint32_t cpu_us = 0;
  uint32_t wait_us = 0;  // kWaitUnknown when the kernel keeps no run-queue statistics
  uint32_t detail = 0;   // the span's Span::detail before its split took the field: a SpanDetail or a text
};
static_assert(sizeof(SpanCpuSplit) == 12, "kept beside millions of spans");

// A span: 24 bytes, for the hundred million a pair of big traces holds. Its duration is exact to the nanosecond up
// to 1.07 s, then kept in microseconds up to 17.9 minutes, milliseconds up to 12 days, seconds up to 34 years (the
// most: longer is a damaged time), always rounded up (a parent never ends before a child that ends with it).
struct Span {
  int64_t t0 = 0;         // ns since the timeline's origin (the earliest event), all processes on one clock
  uint32_t dur_code = 0;  // duration(): two bits of unit, 30 of count
  uint32_t name = 0;      // Timeline::names id
  uint32_t detail = 0;    // bytes, bucket, epoch, micro, args text and CPU split, read through Timeline; 0 = none
  uint32_t step : 24;     // kNoStep when none
  uint32_t stage : 8;     // a Stage when the name (or the Kineto category) maps to our vocabulary, else kNoStage
  Span() : step(kNoStep), stage(kNoStage) {}

  int64_t duration() const {
    static constexpr int64_t kUnit[4] = {1, 1'000, 1'000'000, 1'000'000'000};
    return static_cast<int64_t>(dur_code & kCountMask) * kUnit[dur_code >> 30];
  }
  int64_t t1() const { return t0 + duration(); }
  void set_t1(int64_t t1) { set_duration(t1 - t0); }
  void set_duration(int64_t ns) {
    uint64_t n = ns > 0 ? static_cast<uint64_t>(ns) : 0;
    uint32_t unit = 0;
    for (; unit < 3 && n > kCountMask; ++unit) n = (n + 999) / 1000;  // rounded up
    dur_code = (unit << 30) | static_cast<uint32_t>(std::min<uint64_t>(n, kCountMask));
  }
  void set_step(uint64_t s) { step = static_cast<uint32_t>(std::min<uint64_t>(s, kNoStep - 1)); }
  bool has_stage() const { return stage != kNoStage; }

 private:
  static constexpr uint32_t kCountMask = (1u << 30) - 1;
};
static_assert(sizeof(Span) == 24, "the viewer holds a hundred million spans: keep a span at 24 bytes");

}  // namespace ddp
