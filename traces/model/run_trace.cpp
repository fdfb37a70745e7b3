#include "traces/model/run_trace.h"

#include <algorithm>
#include <limits>

namespace ddp {

int64_t RunTrace::origin_ns() const {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& r : ranks) {
    int64_t off = r.clock_offset_ns();
    for (const auto& e : r.events) origin = std::min(origin, e.t0 + off);
  }
  return origin == std::numeric_limits<int64_t>::max() ? 0 : origin;
}

}  // namespace ddp
