#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "traces/model/rank_trace.h"

namespace ddp {

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
