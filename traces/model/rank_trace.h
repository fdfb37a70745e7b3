#pragma once
// One rank's events, lanes, clocks and metadata: what every reader (native, Kineto) produces and every consumer
// (analysis, export, timeline) reads.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "traces/model/event.h"
#include "traces/model/span_cpu.h"
#include "traces/model/trace_format.h"

namespace ddp {

// Meta key prefix of a user's rank (traces/native/datapath_import.h): "transform_step/<class>" = the ns its loader
// spent in that step of a Compose, for the analysis to say which step of a slow transform costs what.
inline constexpr const char* kTransformStepMeta = "transform_step/";

// One rank's trace as read from its native file.
struct RankTrace {
  uint32_t rank = 0;
  uint32_t world = 0;
  int64_t created_unix_ns = 0;
  std::vector<std::string> lanes;  // index = lane id; unnamed lanes are "lane N"
  std::vector<Event> events;       // spans and counter samples, in file order
  std::vector<SpanCpu> cpu;        // the CPU split of the spans that carry one, by event index (span_cpu.h)
  std::vector<format::ClockPayload> clocks;
  std::map<std::string, std::string> meta;
  bool complete = false;  // the writer closed the file cleanly (an end chunk was read)
  uint64_t dropped = 0;   // events the recorder dropped because a buffer was full (from the end chunk)
  std::string damage;     // empty when every byte was a valid chunk; else where and why reading stopped
  uint64_t good_bytes = 0;

  // Offset (ns) that puts this rank's timestamps on rank 0's clock: the start measurement if present.
  int64_t clock_offset_ns() const;
  const std::string& lane_name(uint8_t lane) const;
  // The CPU split of events[index], or null when it has none (a span recorded without it, a counter).
  const SpanCpu* cpu_of(size_t index) const;
};

}  // namespace ddp
