#include "traces/model/rank_trace.h"

#include <algorithm>

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

const SpanCpu* RankTrace::cpu_of(size_t index) const {
  auto it = std::lower_bound(cpu.begin(), cpu.end(), index, [](const SpanCpu& c, size_t i) { return c.event < i; });
  return it != cpu.end() && it->event == index ? &*it : nullptr;
}

}  // namespace ddp
