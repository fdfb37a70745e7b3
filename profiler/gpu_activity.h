#pragma once
// CUDA activity (kernels, copies, memsets, synchronisation, API calls) as ddp::Events on the span clock.
//
//   ActivitySource  --ActivityRecord batches-->  ActivityCollector  --Events per lane-->  EventSink (the recorder)
//
// A source (CUPTI in CUDA builds; tests/support/fake_activity_source.h in tests) delivers plain records with timestamps in its own
// clock. The collector maps them onto CLOCK_MONOTONIC ns (ClockMap), gives each a lane ("gpu0/stream7" for GPU work,
// "cuda_api/0" for a host thread's API calls and synchronisation waits), stamps the optimizer step that was current
// when the work was launched, interns kernel/API names and writes the events. Event fields for CUDA activity:
//   item   = CUPTI correlation id (an API call and the GPU work it launched share it: the Chrome export draws an arrow)
//   bucket = interned name id (EventSink::name; kNoBucket when none), value = bytes for copies and memsets.
// Nothing here needs CUDA: the CUPTI source lives in cupti_source.cpp and is compiled only with the toolkit.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profiler/recorder.h"
#include "traces/event.h"

namespace ddp::prof {

enum class ActivityKind : uint8_t { kernel, memcpy, memset, sync, runtime_api, driver_api };
// Where a copy reads or writes (CUPTI's memory kinds, folded).
enum class MemKind : uint8_t { unknown, pageable, pinned, device, array, managed };
enum class SyncKind : uint8_t { unknown, event_synchronize, stream_wait_event, stream_synchronize, context_synchronize };

const char* mem_kind_name(MemKind k);
const char* sync_kind_name(SyncKind k);

// One activity record as a source delivers it. `name` (kernel or API function) is valid only during delivery.
struct ActivityRecord {
  ActivityKind kind = ActivityKind::kernel;
  MemKind src = MemKind::unknown;  // memcpy; memset: dst only
  MemKind dst = MemKind::unknown;
  SyncKind sync = SyncKind::unknown;
  bool peer = false;  // memcpy between two devices
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
  uint32_t thread = 0;  // host thread (API records)
  uint64_t bytes = 0;
  uint64_t start = 0;  // the source's clock
  uint64_t end = 0;
  std::string_view name;
};

using RecordSink = std::function<void(const ActivityRecord* records, size_t count)>;

// A producer of activity records. Sources call the sink from any thread, never concurrently with themselves.
class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  virtual const char* name() const = 0;
  // Starts collecting. On failure returns false with a one-line reason in `error`; the source stays inert and
  // every later call is a no-op.
  virtual bool start(RecordSink sink, std::string& error) = 0;
  // Delivers what has completed so far (`force`: everything, including records still in flight). Blocking.
  virtual void flush(bool force) = 0;
  // Stops collecting and delivers everything left.
  virtual void stop() = 0;
  // Reads the source's clock and CLOCK_MONOTONIC together, for ClockMap. Returns false when the source's timestamps
  // are CLOCK_MONOTONIC ns already (a registered timestamp callback); then no mapping is needed.
  virtual bool clock_pair(uint64_t& source_ts, int64_t& monotonic_ns) = 0;
  // Records the source itself lost (its buffers were full).
  virtual uint64_t dropped() const { return 0; }
};

// The source clock -> CLOCK_MONOTONIC ns. Piecewise linear through calibration pairs (source_ts, monotonic_ns): inside
// the calibrated range it interpolates between the two pairs around a timestamp, outside it extends the nearest
// segment's slope (1 with a single pair), so a source clock that drifts or is stepped (CLOCK_REALTIME under NTP)
// is followed from one calibration to the next. Identity until the first pair.
class ClockMap {
 public:
  void add(uint64_t source_ts, int64_t monotonic_ns);
  int64_t to_monotonic(uint64_t source_ts) const;
  bool identity() const { return pairs_.empty(); }
  size_t pairs() const { return pairs_.size(); }

 private:
  struct Pair {
    uint64_t src;
    int64_t mono;
  };
  static int64_t along(const Pair& a, double slope, uint64_t t);
  std::vector<Pair> pairs_;
};

// Takes a calibration pair bracketing the source clock between two CLOCK_MONOTONIC reads (the tightest of a few).
bool sample_source_clock(ActivitySource& src, uint64_t& source_ts, int64_t& monotonic_ns);

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

// Writes into the running recorder (prof::start): lanes via external_lane, names as meta "gpu_name/<id>".
class RecorderSink final : public EventSink {
 public:
  int lane(const std::string& name) override;
  void name(uint16_t id, const std::string& text) override;
  void events(uint8_t lane, const Event* events, size_t count) override;
};

// The stage a record becomes: kernels whose name starts with "nccl" are `nccl`; copies by direction.
Stage stage_for(const ActivityRecord& r);
// "gpu<device>/stream<stream>" for GPU work.
std::string gpu_lane_name(uint32_t device, uint32_t stream);
// A readable name for a copy/memset ("memcpy HtoD pinned->device") or the record's own name (demangled kernels).
std::string display_name(const ActivityRecord& r);

struct CollectorOptions {
  uint32_t flush_ms = 200;  // how often completed records are fetched from the source (0: only on flush()/stop())
  size_t max_names = 0xFFFE;  // interned names (ids fit Event::bucket)
  size_t max_step_marks = 1u << 16;
};

struct CollectorStats {
  uint64_t records = 0;  // delivered by the source
  uint64_t kernels = 0, nccl_kernels = 0, memcpys = 0, memsets = 0, syncs = 0, api_calls = 0;
  uint64_t gpu_linked = 0;       // GPU records whose correlation id matched an API call (coverage)
  uint64_t events_written = 0;
  uint64_t lost = 0;             // no lane could be had, or unknown kinds
  uint64_t incomplete = 0;       // flushed before the GPU finished them (start = end = 0) or end before start
  uint64_t source_dropped = 0;   // the source's own losses
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
  std::unordered_map<uint32_t, uint8_t> thread_lane_;     // host thread -> its cuda_api lane
  std::unordered_map<uint32_t, ApiInfo> api_;             // correlation -> API call (recent)
  std::vector<uint32_t> api_order_;                       // to forget old correlations
  std::vector<Pending> pending_;
  std::unordered_map<uint8_t, std::vector<Event>> out_;  // lane -> events to write

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool quit_ = false;
  std::thread thread_;
};

// ---- the process-wide GPU recorder, used by the runtime ----------------------------------------------------------

struct GpuRecordingOptions {
  uint32_t flush_ms = 200;
  bool driver_api = true;  // also record driver API calls (kernels launched through the driver API get linked)
};

// True in builds that carry the CUPTI source (DDP_PROFILE_CUPTI).
bool cupti_available();
// The CUPTI source, or nullptr in builds without CUPTI.
std::unique_ptr<ActivitySource> make_cupti_source(const GpuRecordingOptions& opt);

// Starts CUPTI activity recording into the running recorder. Returns false with a one-line reason (no CUPTI in this
// build, no driver, no device, CUPTI error) and leaves training untouched; call after prof::start.
bool gpu_start(const GpuRecordingOptions& opt, std::string& why);
// Starts recording from any source (tests, or a source the caller built).
bool gpu_start(std::unique_ptr<ActivitySource> source, const GpuRecordingOptions& opt, std::string& why);
// The step context for GPU work launched from now on; cheap, call once per micro-step (no-op when not recording).
void gpu_mark_step(const StepContext& ctx);
// Writes everything recorded so far (e.g. before a flush on SIGTERM); no-op when not recording.
void gpu_flush();
// Stops and writes everything; call before prof::stop. Returns the totals (all zero when GPU recording was off).
CollectorStats gpu_stop();
bool gpu_recording();

}  // namespace ddp::prof
