#pragma once
// The fixed-size event every span, counter sample and GPU activity record becomes. Kept at 40 bytes so per-thread
// ring buffers stay cache friendly; on disk events are delta/varint coded and zstd compressed (see event_codec.h).
#include <cstdint>

#include "traces/stages.h"

namespace ddp {

enum class EventKind : uint8_t { span = 0, counter = 1 };

inline constexpr uint16_t kNoBucket = 0xFFFF;

struct Event {
  int64_t t0 = 0;      // begin, ns on the rank's monotonic clock (ticks while still inside the profiler's ring)
  int64_t t1 = 0;      // end; equal to t0 for counter samples
  uint64_t value = 0;  // bytes moved by the span, or the counter's value
  uint32_t step = 0;   // optimizer step, counted from 0 across epochs
  uint32_t item = 0;   // batch index inside the epoch (data stages), or samples in the batch (compute stages)
  uint16_t epoch = 0;
  uint16_t bucket = kNoBucket;  // gradient bucket for allreduce spans
  uint8_t micro = 0;            // micro-step inside the optimizer step (gradient accumulation)
  uint8_t stage = 0;            // Stage for spans, Counter for counters
  uint8_t kind = 0;             // EventKind
  uint8_t lane = 0;             // the recording thread's lane, local to its rank

  Stage stage_id() const { return static_cast<Stage>(stage); }
  bool is_span() const { return kind == static_cast<uint8_t>(EventKind::span); }
  int64_t duration() const { return t1 - t0; }
};
static_assert(sizeof(Event) == 40, "Event must stay a fixed 40 bytes");

// A span of stage `s` on `lane`; step, item, bucket and value keep their defaults for the caller to set.
inline Event make_span(Stage s, uint8_t lane, int64_t t0, int64_t t1) {
  Event e;
  e.t0 = t0;
  e.t1 = t1;
  e.stage = static_cast<uint8_t>(s);
  e.kind = static_cast<uint8_t>(EventKind::span);
  e.lane = lane;
  return e;
}

}  // namespace ddp
