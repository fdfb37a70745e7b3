#pragma once
// The --slow knobs' delay: rehearsing a slow stage by sleeping inside its span.
#include <chrono>
#include <thread>

namespace ddp {
inline void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}
}  // namespace ddp
