#include "profiler/host_memory.h"

#include <unistd.h>

#include <cstdio>

namespace ddp::prof {
uint64_t host_rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}
}  // namespace ddp::prof
