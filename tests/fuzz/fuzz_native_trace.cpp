// Our native trace format (.ddpt) on any bytes: read up to the last chunk that verifies, the rest reported.
#include <cstdint>

#include "traces/native/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::TraceReadResult r = ddp::read_trace_bytes(data, size);
  if (r.ok())
    for (const auto& e : r.trace.events) (void)r.trace.lane_name(e.lane);
  return 0;
}
