#pragma once
// The per-rank recorder. Hot path: a span writes one fixed-size Event into its thread's ring buffer (no locks, no
// allocation, no formatting); a writer thread drains the rings every few tens of milliseconds into the native trace
// file, converting ticks to nanoseconds. A full ring drops events and counts them rather than stall training.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "profiler/clock.h"
#include "traces/model/event.h"
#include "traces/model/span_cpu.h"
#include "traces/model/trace_format.h"

namespace ddp::prof {

struct RecorderConfig {
  std::string path;  // native trace file to create
  uint32_t rank = 0;
  uint32_t world = 1;
  uint32_t ring_events = 1u << 15;  // per thread, rounded up to a power of two
  uint32_t flush_ms = 50;
  bool sample_host_memory = true;
};

// Per-thread step context, stamped onto every span the thread records.
struct StepContext {
  uint32_t step = 0;
  uint16_t epoch = 0;
  uint8_t micro = 0;
};

struct RecorderStats {
  uint64_t events = 0;   // records written: spans, their CPU splits, counters
  uint64_t dropped = 0;  // spans (each with its split) and counters a full ring refused
  uint64_t bytes = 0;
};

// One cache line holds everything a span touches (written by the owner only); the drainer writes `tail` on a line of
// its own, which the owner reads only when its cached copy says the ring is full.
struct ThreadBuffer {
  alignas(64) std::atomic<uint64_t> head{0};
  uint64_t tail_seen = 0;            // the owner's last read of `tail`
  std::atomic<uint64_t> dropped{0};  // single writer (the owner): plain increments, read at stop()
  Event* ring = nullptr;             // owned by ring_storage
  uint64_t mask = 0;
  uint8_t lane = 0;
  StepContext ctx;
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the drainer
  // Raw bytes, not Event[]: constructing a ring's 32 K events wrote 1.3 MB per thread in the first step it recorded
  // (~0.3 ms each, 1.5 ms of the recorded job's first step); a slot is written whole before it is published.
  std::unique_ptr<unsigned char[]> ring_storage;

  // The slot for the next event, or nullptr (counted as dropped) when the drainer has not caught up.
  Event* claim(uint64_t h) {
    if (h - tail_seen > mask) {
      tail_seen = tail.load(std::memory_order_acquire);
      if (h - tail_seen > mask) {
        dropped.store(dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return nullptr;
      }
    }
    return &ring[h & mask];
  }
};

extern std::atomic<bool> g_recording;
extern std::atomic<uint32_t> g_generation;
extern thread_local ThreadBuffer* t_buffer;
// The recording t_buffer belongs to. Kept beside the pointer, not in the buffer: a thread that recorded in an earlier
// recording must see that its buffer is stale without reading it (stop() freed it).
extern thread_local uint32_t t_buffer_generation;

inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

// Starts recording into cfg.path. Returns false with `error` set when the file cannot be created.
bool start(const RecorderConfig& cfg, std::string& error);
// Drains everything, writes the end chunk and closes the file. Call after recording threads are done.
RecorderStats stop();
// Drains every buffer now; safe from any thread at any time, also while another thread is in start() or stop() (the
// SIGTERM thread and a failing rank call it whenever they must). Blocks; never call it from a signal handler.
void flush();

// Names the calling thread's lane ("main", "loader/0", "comm", ...). Lanes are numbered in order of first use.
void name_this_thread(const std::string& lane_name);
ThreadBuffer* attach_thread();  // slow path: first event of a thread in this recording

inline ThreadBuffer* this_thread_buffer() {
  ThreadBuffer* b = t_buffer;
  if (__builtin_expect(b == nullptr || t_buffer_generation != g_generation.load(std::memory_order_relaxed), 0))
    b = attach_thread();
  return b;
}

// The calling thread's step context from now on. One struct, not three integers a caller could transpose.
inline void set_context(const StepContext& ctx) {
  if (!recording()) return;
  ThreadBuffer* b = this_thread_buffer();
  if (b) b->ctx = ctx;
}

// Names the calling thread's lane once per recording (cheap after the first call): for threads we do not own, such
// as Gloo's worker thread recording the allreduce spans it completes.
inline void name_this_thread_once(const char* lane_name) {
  thread_local uint32_t named_generation = 0;
  const uint32_t g = g_generation.load(std::memory_order_relaxed);
  if (named_generation == g || !recording()) return;
  name_this_thread(lane_name);
  named_generation = g;
}

// Records one finished span. t0/t1 are ticks().
inline void record_span(Stage stage, uint64_t t0, uint64_t t1, uint64_t value = 0, uint16_t bucket = kNoBucket,
                        uint32_t item = 0, const StepContext* ctx = nullptr) {
  ThreadBuffer* b = this_thread_buffer();
  if (!b) return;
  const uint64_t h = b->head.load(std::memory_order_relaxed);
  Event* slot = b->claim(h);
  if (!slot) return;
  const StepContext& c = ctx ? *ctx : b->ctx;
  Event& e = *slot;
  e.t0 = static_cast<int64_t>(t0);
  e.t1 = static_cast<int64_t>(t1);
  e.value = value;
  e.step = c.step;
  e.item = item;
  e.epoch = c.epoch;
  e.bucket = bucket;
  e.micro = c.micro;
  e.stage = static_cast<uint8_t>(stage);
  e.kind = static_cast<uint8_t>(EventKind::span);
  e.lane = b->lane;
  b->head.store(h + 1, std::memory_order_release);
}

// Records one finished span and its CPU split as one unit (t0/t1 are ticks()): `cpu_ns` on a CPU, `wait_ns` waiting
// for one (negative: not known). The split is a cpu event in the slot after the span's, both published by one store
// of `head`, so a full ring drops the pair and counts one dropped span: a reader never sees one without the other.
inline void record_span_cpu(Stage stage, uint64_t t0, uint64_t t1, uint64_t value, uint16_t bucket, uint32_t item,
                            const StepContext* ctx, int64_t cpu_ns, int64_t wait_ns) {
  ThreadBuffer* b = this_thread_buffer();
  if (!b) return;
  const uint64_t h = b->head.load(std::memory_order_relaxed);
  if (!b->claim(h + 1)) return;  // the second slot free means the first is
  const StepContext& c = ctx ? *ctx : b->ctx;
  Event& e = b->ring[h & b->mask];
  e.t0 = static_cast<int64_t>(t0);
  e.t1 = static_cast<int64_t>(t1);
  e.value = value;
  e.step = c.step;
  e.item = item;
  e.epoch = c.epoch;
  e.bucket = bucket;
  e.micro = c.micro;
  e.stage = static_cast<uint8_t>(stage);
  e.kind = static_cast<uint8_t>(EventKind::span);
  e.lane = b->lane;
  b->ring[(h + 1) & b->mask] = cpu_event(e, static_cast<uint64_t>(cpu_ns > 0 ? cpu_ns : 0), wait_ns);
  b->head.store(h + 2, std::memory_order_release);
}

void record_counter(Counter counter, uint64_t value);
// Lanes for events that arrive finished, with CLOCK_MONOTONIC ns timestamps (CUDA activity from CUPTI): the lane id
// for `name` (one id per name for the whole recording), or -1 when not recording or lane ids are exhausted.
int external_lane(const std::string& name);
// Writes such events (e.lane is set to `lane`) straight to the trace; thread-safe.
void record_external(uint8_t lane, const Event* events, size_t count);
void record_clock(const format::ClockPayload& clock);
void record_meta(const std::string& key, const std::string& value);

}  // namespace ddp::prof
