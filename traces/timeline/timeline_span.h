#pragma once
// One span of the viewer's timeline (traces/timeline/timeline.h), in a header of its own so that the staging of
// spans (staged_spans.h) needs nothing else.
#include <cstdint>

#include "traces/model/event.h"

namespace ddp {

inline constexpr uint8_t kNoStage = 0xFF;
inline constexpr uint32_t kNoStep = 0xFFFFFFFF;

// What some spans carry beyond their times and names: bytes moved and the gradient bucket (our runs' allreduces,
// copies and reads; Kineto collectives), with the span's args text. Kept apart so that a span is 32 bytes.
struct SpanDetail {
  uint64_t bytes = 0;
  uint32_t text = 0;  // ExtraTexts id; 0 = none
  uint16_t bucket = kNoBucket;
};

struct Span {
  int64_t t0 = 0;  // ns since the timeline's origin (the earliest event), all processes on one clock
  int64_t t1 = 0;
  uint32_t step = kNoStep;
  uint32_t name = 0;    // Timeline::names id
  uint32_t detail = 0;  // bytes, bucket and args text, read through Timeline::bytes/bucket/extra; 0 = none
  uint16_t epoch = 0;
  uint8_t micro = 0;
  uint8_t stage = kNoStage;  // a Stage when the name (or the Kineto category) maps to our vocabulary
  int64_t duration() const { return t1 - t0; }
  bool has_stage() const { return stage != kNoStage; }
};
static_assert(sizeof(Span) == 32, "the viewer holds tens of millions of spans: keep a span at 32 bytes");

}  // namespace ddp
