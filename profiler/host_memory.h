#pragma once
#include <cstdint>

namespace ddp::prof {
// Resident set size of this process in bytes (from /proc/self/statm), 0 when unavailable.
uint64_t host_rss_bytes();
}  // namespace ddp::prof
