#include "profiler/clock.h"

#include <fstream>
#include <string>
#include <thread>

namespace ddp::prof {

#if defined(__x86_64__)
namespace {
bool cpu_has_invariant_tsc() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
  return false;
}
}  // namespace
bool g_use_tsc = cpu_has_invariant_tsc();
#endif

bool ticks_are_tsc() {
#if defined(__x86_64__)
  return g_use_tsc;
#else
  return false;
#endif
}

ClockPair sample_clock_pair() {
  // The tightest of a few bracketed readings: a preempted reading would skew the mapping.
  ClockPair best{0, 0};
  int64_t best_window = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    int64_t a = monotonic_ns();
    uint64_t t = ticks();
    int64_t b = monotonic_ns();
    if (b - a < best_window) {
      best_window = b - a;
      best = {t, a + (b - a) / 2};
    }
  }
  return best;
}

void TickConverter::reset() { have_ = false; }

void TickConverter::add(const ClockPair& p) {
  if (!ticks_are_tsc()) return;
  if (!have_) {
    // Measure a nominal rate once so the first flush can already convert.
    ClockPair a = p;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ClockPair b = sample_clock_pair();
    ns_per_tick_ = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks);
    prev_ = a;
    cur_ = b;
    have_ = true;
    return;
  }
  // Keep segments at least 10 ms long so sampling jitter stays a negligible share of the slope.
  if (p.ns - cur_.ns < 10'000'000) return;
  prev_ = cur_;
  cur_ = p;
  ns_per_tick_ = static_cast<double>(cur_.ns - prev_.ns) / static_cast<double>(cur_.ticks - prev_.ticks);
}

int64_t TickConverter::to_ns(uint64_t t) const {
  if (!ticks_are_tsc()) return static_cast<int64_t>(t);
  double dt = static_cast<double>(static_cast<int64_t>(t - cur_.ticks));
  return cur_.ns + static_cast<int64_t>(dt * ns_per_tick_);
}

}  // namespace ddp::prof
