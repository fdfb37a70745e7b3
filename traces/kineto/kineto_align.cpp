#include "traces/kineto/kineto_align.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "traces/base/stats.h"

namespace ddp {

ClockEstimate estimate_offset(int rank, std::vector<CollectiveAnchor> mine, std::vector<CollectiveAnchor> reference) {
  ClockEstimate est;
  est.rank = rank;
  std::sort(mine.begin(), mine.end());
  std::sort(reference.begin(), reference.end());
  std::vector<double> diffs;
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  auto r = reference.begin();
  for (const CollectiveAnchor& a : mine) {
    while (r != reference.end() && *r < a) ++r;
    if (r == reference.end()) break;
    if (a < *r) continue;  // the reference rank has no such collective
    if (a.bytes && r->bytes && a.bytes != r->bytes) continue;
    diffs.push_back(static_cast<double>(a.end_ns - r->end_ns));
    // Neither rank can finish before the other started: offset >= my start - its end, <= my end - its start.
    lo = std::max(lo, a.start_ns - r->end_ns);
    hi = std::min(hi, a.end_ns - r->start_ns);
  }
  est.matched = diffs.size();
  if (diffs.empty()) return est;
  const double m = median(diffs);
  std::vector<double> dev;
  dev.reserve(diffs.size());
  for (double d : diffs) dev.push_back(std::fabs(d - m));
  est.offset_ns = static_cast<int64_t>(std::llround(m));
  est.mad_ns = static_cast<int64_t>(std::llround(median(dev)));
  est.measured = true;
  est.min_ns = lo;
  est.max_ns = hi;
  est.bounded = lo <= hi;
  if (est.bounded && (est.offset_ns < lo || est.offset_ns > hi)) {
    est.offset_ns = std::clamp(est.offset_ns, lo, hi);
    est.clamped = true;
  }
  return est;
}

}  // namespace ddp
