#pragma once
// The fixed-size event every span, counter sample and GPU activity record becomes. Kept at 40 bytes so per-thread
// ring buffers stay cache friendly; on disk events are delta/varint coded and zstd compressed (see event_codec.h).
#include <cstdint>

#include "traces/model/stages.h"

namespace ddp {

// span: a stage's interval on a thread. counter: a sample (t1 = t0). cpu: the CPU split of the span just before it on
// the same lane (traces/model/span_cpu.h): the span's own t0, t1, stage, step, epoch, micro and bucket, with `value`
// the thread's time on a CPU within it (ns) and `item` its time runnable but waiting for a core (us). Readers fold
// cpu events into RankTrace::cpu: RankTrace::events holds spans and counters only.
enum class EventKind : uint8_t { span = 0, counter = 1, cpu = 2 };

inline constexpr uint16_t kNoBucket = 0xFFFF;
inline constexpr uint16_t kNoName = kNoBucket;  // a CUDA event without an interned name

// Three fields are shared by several event kinds, to keep the event at 40 bytes (their meaning depends on the kind
// and stage); read them through the accessor that names what the caller expects:
//   item   = batch_index() for data stages, samples() for compute stages, correlation_id() for CUDA events
//   bucket = bucket_index() for allreduce spans, name_id() for CUDA events (an interned "gpu_name/<id>" meta entry)
//   stage  = stage_id() for spans, counter_id() for counter samples
struct Event {
  int64_t t0 = 0;      // begin, ns on the rank's monotonic clock (ticks while still inside the profiler's ring)
  int64_t t1 = 0;      // end; equal to t0 for counter samples
  uint64_t value = 0;  // bytes moved by the span, or the counter's value
  uint32_t step = 0;   // optimizer step, counted from 0 across epochs
  uint32_t item = 0;   // see above: batch index, sample count or CUPTI correlation id
  uint16_t epoch = 0;
  uint16_t bucket = kNoBucket;  // see above: gradient bucket or CUDA name id
  uint8_t micro = 0;            // micro-step inside the optimizer step (gradient accumulation)
  uint8_t stage = 0;            // Stage for spans, Counter for counters
  uint8_t kind = 0;             // EventKind
  uint8_t lane = 0;             // the recording thread's lane, local to its rank

  Stage stage_id() const { return static_cast<Stage>(stage); }
  Counter counter_id() const { return static_cast<Counter>(stage); }
  bool is_span() const { return kind == static_cast<uint8_t>(EventKind::span); }
  // A span recorded from CUDA activity (GPU work, or an API call / sync wait on a host thread).
  bool is_cuda() const { return is_span() && (is_gpu_activity(stage_id()) || is_cuda_host(stage_id())); }
  int64_t duration() const { return t1 - t0; }

  uint32_t batch_index() const { return item; }     // data stages: the batch's index inside the epoch
  uint32_t samples() const { return item; }         // compute stages: samples in the batch
  uint32_t correlation_id() const { return item; }  // CUDA events: 0 when CUPTI gave none
  uint16_t bucket_index() const { return bucket; }  // allreduce spans: kNoBucket when not bucketed
  uint16_t name_id() const { return bucket; }       // CUDA events: kNoName when unnamed
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
