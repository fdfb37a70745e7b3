#pragma once
// One clock for per-rank Kineto traces. Each rank's trace is on its own host's clock; ranks on different hosts can be
// milliseconds apart. A collective ends at nearly the same instant on every rank (the last arrival releases all), so
// the k-th collective of a process group, matched across ranks, is a common instant: a rank's offset is the median of
// its end-time differences to the reference rank, and the spread of those differences (the median absolute
// deviation) is its uncertainty. A collective also cannot end on one rank before it started on the other: over all
// matched collectives that bounds the offset for certain, and the median is kept inside those bounds (a CPU-starved
// rank records its ends late by a steady amount that no spread shows; the bounds do). docs/kineto.md, "One clock".
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace ddp {

// One collective on one rank: which one it is (process group, step, order inside the step), its size when known
// and when it ended on that rank's clock.
struct CollectiveAnchor {
  std::string pg;
  uint32_t step = 0;
  uint32_t ordinal = 0;
  uint64_t bytes = 0;  // 0: unknown
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool operator<(const CollectiveAnchor& o) const {
    return std::tie(pg, step, ordinal) < std::tie(o.pg, o.step, o.ordinal);
  }
};

struct ClockEstimate {
  int rank = 0;
  int64_t offset_ns = 0;  // this rank's clock minus the reference rank's: subtract it to put the rank on one clock
  int64_t mad_ns = 0;     // median absolute deviation of the end-time differences (the uncertainty)
  size_t matched = 0;     // collectives matched with the reference rank
  bool measured = false;  // false: nothing matched, offset left at 0
  // The offset lies in [min_ns, max_ns] for certain (causality); `bounded` is false when the bounds contradict each
  // other (clocks that drift, or collectives matched wrongly) and then they are not applied.
  int64_t min_ns = 0, max_ns = 0;
  bool bounded = false;
  bool clamped = false;  // the median was outside the bounds and was moved to the nearer one
};

// Estimates `rank`'s offset from its anchors and the reference rank's. Collectives are matched by (process group,
// step, order); a pair whose sizes are both known and differ is not the same collective and is skipped.
ClockEstimate estimate_offset(int rank, std::vector<CollectiveAnchor> mine, std::vector<CollectiveAnchor> reference);

}  // namespace ddp
