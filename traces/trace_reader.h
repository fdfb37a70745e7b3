#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "traces/event.h"
#include "traces/trace_format.h"

namespace ddp {

// One rank's trace as read from its native file.
struct RankTrace {
  uint32_t rank = 0;
  uint32_t world = 0;
  int64_t created_unix_ns = 0;
  std::vector<std::string> lanes;  // index = lane id; unnamed lanes are "lane N"
  std::vector<Event> events;       // spans and counter samples, in file order
  std::vector<format::ClockPayload> clocks;
  std::map<std::string, std::string> meta;
  bool complete = false;  // the writer closed the file cleanly (an end chunk was read)
  uint64_t dropped = 0;   // events the recorder dropped because a buffer was full (from the end chunk)
  std::string damage;     // empty when every byte was a valid chunk; else where and why reading stopped
  uint64_t good_bytes = 0;

  // Offset (ns) that puts this rank's timestamps on rank 0's clock: the start measurement if present.
  int64_t clock_offset_ns() const;
  const std::string& lane_name(uint8_t lane) const;
};

enum class TraceError { none, cannot_open, not_a_trace, unsupported_version };

struct TraceReadResult {
  TraceError error = TraceError::none;
  std::string message;  // for errors: what is wrong; the trace's own damage report is in trace.damage
  RankTrace trace;
  bool ok() const { return error == TraceError::none; }
};

// Reads a native trace. Damaged or truncated files are read up to the last chunk that verifies; the rest is reported
// in `trace.damage`. Never throws on bad input.
TraceReadResult read_trace_file(const std::string& path);
TraceReadResult read_trace_bytes(const uint8_t* data, size_t size);

}  // namespace ddp
