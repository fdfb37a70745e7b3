#include "profiler/thread_cpu.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

namespace ddp::prof {
namespace {

// The thread's /proc/thread-self/schedstat, opened on its first read: "thread-self" names the thread that opens it,
// so each thread keeps its own.
struct SchedStat {
  int fd = -2;  // -2: not opened yet; -1: not available
  ~SchedStat() {
    if (fd >= 0) ::close(fd);
  }
  int64_t run_delay_ns() {
    if (fd == -2) fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[96];
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    // "<on cpu ns> <run delay ns> <timeslices>"
    char* end = nullptr;
    std::strtoull(buf, &end, 10);
    const char* second = end;
    const unsigned long long delay = std::strtoull(second, &end, 10);
    return end == second ? -1 : static_cast<int64_t>(delay);
  }
};

thread_local SchedStat t_schedstat;
thread_local uint64_t t_last_ticks = 0;
thread_local CpuMark t_last;

}  // namespace

CpuMark cpu_mark(uint64_t now) {
  if (t_last_ticks != 0 && now >= t_last_ticks && now - t_last_ticks <= kCpuMarkReuseTicks) return t_last;
  CpuMark m;
  timespec ts;
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
    m.cpu_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  m.wait_ns = t_schedstat.run_delay_ns();
  t_last_ticks = now;
  t_last = m;
  return m;
}

bool run_queue_wait_known() {
  static const bool known = [] { return ::access("/proc/thread-self/schedstat", R_OK) == 0; }();
  return known;
}

}  // namespace ddp::prof
