#pragma once
// A source's clock mapped onto CLOCK_MONOTONIC ns, the clock spans are recorded on.
#include <cstdint>
#include <vector>

#include "profiler/activity_source.h"

namespace ddp::prof {

// The source clock -> CLOCK_MONOTONIC ns. Piecewise linear through calibration pairs (source_ts, monotonic_ns): inside
// the calibrated range it interpolates between the two pairs around a timestamp, outside it extends the nearest
// segment's slope (1 with a single pair), so a source clock that drifts or is stepped (CLOCK_REALTIME under NTP)
// is followed from one calibration to the next. Identity until the first pair.
class ClockMap {
 public:
  void add(uint64_t source_ts, int64_t monotonic_ns);
  int64_t to_monotonic(uint64_t source_ts) const;
  bool identity() const { return pairs_.empty(); }
  size_t pairs() const { return pairs_.size(); }

 private:
  struct Pair {
    uint64_t src;
    int64_t mono;
  };
  static int64_t along(const Pair& a, double slope, uint64_t t);
  std::vector<Pair> pairs_;
};

// Takes a calibration pair bracketing the source clock between two CLOCK_MONOTONIC reads (the tightest of a few).
bool sample_source_clock(ActivitySource& src, uint64_t& source_ts, int64_t& monotonic_ns);

}  // namespace ddp::prof
