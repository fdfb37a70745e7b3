#pragma once
// Converts an ActivitySource's records into trace events on the span clock and writes them to an EventSink:
//
//   ActivitySource  --ActivityRecord batches-->  ActivityCollector  --Events per lane-->  EventSink (the recorder)
//
// The collector maps source timestamps onto CLOCK_MONOTONIC ns (ClockMap), gives each record a lane ("gpu0/stream7"
// for GPU work, "cuda_api/0" for a host thread's API calls and synchronisation waits), stamps the optimizer step that
// was current when the work was launched, interns kernel/API names and writes the events. Event fields for CUDA
// activity:
//   item   = CUPTI correlation id (an API call and the GPU work it launched share it: the Chrome export draws an arrow)
//   bucket = interned name id (EventSink::name; kNoBucket when none), value = bytes for copies and memsets.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/activity_source.h"
#include "profiler/clock_map.h"
#include "profiler/recorder.h"
#include "traces/model/event.h"

namespace ddp::prof {

// Where converted events go. The recorder's sink writes them to the trace; tests keep them in memory.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // A lane id for `name` (the same id for the same name), or -1 when no lane can be had.
  virtual int lane(const std::string& name) = 0;
  // A new interned name: `id` is what CUDA events carry in Event::bucket.
  virtual void name(uint16_t id, const std::string& text) = 0;
  virtual void events(uint8_t lane, const Event* events, size_t count) = 0;
};

struct CollectorOptions {
  uint32_t flush_ms = 200;    // how often completed records are fetched from the source (0: only on flush()/stop())
  size_t max_names = 0xFFFE;  // interned names (ids fit Event::bucket)
  size_t max_step_marks = 1u << 16;
};

struct CollectorStats {
  uint64_t records = 0;  // delivered by the source
  uint64_t kernels = 0, nccl_kernels = 0, memcpys = 0, memsets = 0, syncs = 0, api_calls = 0;
  uint64_t gpu_linked = 0;  // GPU records whose correlation id matched an API call (coverage)
  uint64_t events_written = 0;
  uint64_t lost = 0;            // no lane could be had, or unknown kinds
  uint64_t incomplete = 0;      // flushed before the GPU finished them (start = end = 0) or end before start
  uint64_t source_dropped = 0;  // the source's own losses
  uint64_t memcpy_bytes_pinned = 0, memcpy_bytes_pageable = 0;  // host-to-device bytes by source memory kind
  int64_t memcpy_ns_pinned = 0, memcpy_ns_pageable = 0;
};

// Converts a source's records into events on the span clock and writes them to a sink.
//
// Linking: an API record and the GPU work it launched carry the same correlation id. GPU and sync records whose API
// record has not arrived yet (CUPTI delivers API and GPU buffers separately) wait in a pending list until the next
// flush, so they get the launching call's step context and, for sync records, the calling thread's lane; those still
// unmatched then are written with their own timestamp's step and a shared lane.
class ActivityCollector {
 public:
  ActivityCollector(std::unique_ptr<ActivitySource> source, EventSink& sink, CollectorOptions opt = {});
  ~ActivityCollector();
  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;

  // Starts the source (and the periodic flush thread). False with the source's one-line reason on failure.
  bool start(std::string& error);
  // Fetches completed records, resolves what can be resolved and writes. `force`: everything, pending included.
  void flush(bool force = false);
  // Stops the source, writes everything. Idempotent.
  CollectorStats stop();
  // The training thread's step context from now on (GPU work launched after this belongs to it).
  void mark_step(const StepContext& ctx);
  void mark_step(const StepContext& ctx, int64_t monotonic_ns);  // tests: explicit time
  CollectorStats stats() const;
  const ClockMap& clock() const { return clock_; }

 private:
  struct Pending {
    Event e;
    std::string lane;  // empty: the launching thread's API lane, decided at resolve (sync records)
    int waited = 0;    // resolves waited for the API record
  };
  struct ApiInfo {
    int64_t t0 = 0, t1 = 0;
    uint8_t lane = 0;
  };

  void on_records(const ActivityRecord* records, size_t count);  // the source's thread
  // One record, under mu_: API calls are written at once, GPU and sync records wait in pending_ for resolve().
  void take(const ActivityRecord& r);
  Event to_event(const ActivityRecord& r);  // mapped times, correlation, interned name
  int api_lane(uint32_t thread);            // the host thread's cuda_api lane, or -1
  void write_api_call(const ActivityRecord& r, Event e);
  void remember_api(uint32_t correlation, const ApiInfo& call);    // for linking, the oldest half forgotten when full
  bool count_gpu_record(const ActivityRecord& r, const Event& e);  // false: a kind we do not record
  void hold_gpu_record(const ActivityRecord& r, const Event& e);
  void calibrate();
  // Writes pending records whose API record is known; `age`: a flush passed (unmatched ones age, then go out
  // unlinked); `force`: everything goes out. Under mu_.
  void resolve(bool force, bool age);
  StepContext step_at(int64_t ns) const;     // under mu_
  uint16_t intern(const std::string& text);  // under mu_
  int lane_id(const std::string& name);      // under mu_
  void emit(uint8_t lane, const Event& e);   // under mu_
  void write_out();                          // under mu_
  void flush_loop();

  std::unique_ptr<ActivitySource> source_;
  EventSink& sink_;
  CollectorOptions opt_;
  bool started_ = false, stopped_ = false;
  ClockMap clock_;
  bool identity_clock_ = false;

  mutable std::mutex mu_;
  CollectorStats stats_;
  std::vector<std::pair<int64_t, StepContext>> marks_;  // sorted by time
  std::unordered_map<std::string, uint16_t> names_;
  std::unordered_map<std::string, int> lanes_;
  std::unordered_map<uint32_t, uint8_t> thread_lane_;  // host thread -> its cuda_api lane
  std::unordered_map<uint32_t, ApiInfo> api_;          // correlation -> API call (recent)
  std::vector<uint32_t> api_order_;                    // to forget old correlations
  std::vector<Pending> pending_;
  std::unordered_map<uint8_t, std::vector<Event>> out_;  // lane -> events to write

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace ddp::prof
