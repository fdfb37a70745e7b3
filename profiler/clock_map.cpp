#include "profiler/clock_map.h"

#include <algorithm>
#include <cstdint>

#include "profiler/clock.h"

namespace ddp::prof {

int64_t ClockMap::along(const Pair& a, double slope, uint64_t t) {
  const double dt = static_cast<double>(static_cast<int64_t>(t - a.src));
  return a.mono + static_cast<int64_t>(dt * slope);
}

void ClockMap::add(uint64_t source_ts, int64_t monotonic_ns) {
  // Pairs arrive in time order; one that does not advance the source clock carries no information.
  if (!pairs_.empty() && source_ts <= pairs_.back().src) {
    if (source_ts == pairs_.back().src) pairs_.back().mono = monotonic_ns;
    return;
  }
  pairs_.push_back({source_ts, monotonic_ns});
}

int64_t ClockMap::to_monotonic(uint64_t t) const {
  if (pairs_.empty()) return static_cast<int64_t>(t);
  if (pairs_.size() == 1) return along(pairs_[0], 1.0, t);
  auto slope = [](const Pair& a, const Pair& b) {
    return static_cast<double>(b.mono - a.mono) / static_cast<double>(b.src - a.src);
  };
  // The segment [i-1, i] containing t; before the first or after the last pair, the nearest segment extended.
  auto it = std::upper_bound(pairs_.begin(), pairs_.end(), t, [](uint64_t v, const Pair& p) { return v < p.src; });
  size_t i = static_cast<size_t>(it - pairs_.begin());
  if (i == 0) i = 1;
  if (i >= pairs_.size()) i = pairs_.size() - 1;
  const Pair& a = pairs_[i - 1];
  const Pair& b = pairs_[i];
  // A segment whose slope is far from 1 (the source clock was stepped between the pairs) is not interpolated across:
  // times take the offset of the pair on their side of the step.
  double s = slope(a, b);
  if (s < 0.5 || s > 2.0) return t < b.src ? along(a, 1.0, t) : along(b, 1.0, t);
  return along(a, s, t);
}

bool sample_source_clock(ActivitySource& src, uint64_t& source_ts, int64_t& mono_ns) {
  int64_t best = INT64_MAX;
  bool ok = false;
  for (int i = 0; i < 5; ++i) {
    uint64_t s = 0;
    int64_t m = 0;
    int64_t a = monotonic_ns();
    if (!src.clock_pair(s, m)) return false;
    int64_t b = monotonic_ns();
    if (b - a < best) {
      best = b - a;
      source_ts = s;
      mono_ns = m;
      ok = true;
    }
  }
  return ok;
}

}  // namespace ddp::prof
