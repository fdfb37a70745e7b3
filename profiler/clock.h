#pragma once
// Timestamps for the hot path. On x86-64 with an invariant TSC a span reads the TSC (about half the cost of
// clock_gettime here); the writer thread converts ticks to CLOCK_MONOTONIC nanoseconds by interpolating between
// paired (tsc, monotonic) samples it takes at every flush. Elsewhere ticks are CLOCK_MONOTONIC nanoseconds.
#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace ddp::prof {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// True when ticks() reads the TSC (decided once at start-up from the CPU's invariant-TSC flag).
bool ticks_are_tsc();

inline uint64_t ticks() {
#if defined(__x86_64__)
  extern bool g_use_tsc;
  if (g_use_tsc) return __rdtsc();
#endif
  return static_cast<uint64_t>(monotonic_ns());
}

// A pair of readings of both clocks taken as close together as possible.
struct ClockPair {
  uint64_t ticks;
  int64_t ns;
};
ClockPair sample_clock_pair();

// Maps ticks to monotonic ns by linear interpolation between the last two pairs; with one pair it uses the nominal
// rate measured at start-up.
class TickConverter {
 public:
  void reset();
  void add(const ClockPair& p);
  int64_t to_ns(uint64_t t) const;

 private:
  ClockPair prev_{0, 0}, cur_{0, 0};
  double ns_per_tick_ = 1.0;
  bool have_ = false;
};

}  // namespace ddp::prof
