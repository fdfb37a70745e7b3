#include "traces/model/rank_trace.h"

namespace ddp {

int64_t RankTrace::clock_offset_ns() const {
  for (const auto& c : clocks)
    if (c.phase == 0) return c.offset_ns;
  return clocks.empty() ? 0 : clocks.front().offset_ns;
}

const std::string& RankTrace::lane_name(uint8_t lane) const {
  static const std::string unknown = "unknown lane";
  return lane < lanes.size() ? lanes[lane] : unknown;
}

}  // namespace ddp
