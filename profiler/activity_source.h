#pragma once
// What a producer of CUDA activity (CUPTI in CUDA builds, a fake in tests) delivers: plain records with timestamps in
// the source's own clock, handed to a RecordSink in batches. Nothing here needs CUDA.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ddp::prof {

enum class ActivityKind : uint8_t { kernel, memcpy, memset, sync, runtime_api, driver_api };
// Where a copy reads or writes (CUPTI's memory kinds, folded).
enum class MemKind : uint8_t { unknown, pageable, pinned, device, array, managed };
enum class SyncKind : uint8_t {
  unknown,
  event_synchronize,
  stream_wait_event,
  stream_synchronize,
  context_synchronize
};

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

}  // namespace ddp::prof
