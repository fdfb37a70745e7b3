#include "runtime/launch/environment/batch_scheduling.h"

#include <dirent.h>
#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ddp {

BatchSchedulingScope::BatchSchedulingScope(bool enabled) {
  // Only from the normal policy: a rank someone started under a real-time or idle policy keeps what they chose.
  if (!enabled || ::sched_getscheduler(0) != SCHED_OTHER) return;
  const sched_param zero{};  // SCHED_BATCH and SCHED_OTHER have one static priority, 0
  if (::sched_setscheduler(0, SCHED_BATCH, &zero) != 0) {
    error_ = std::string("cannot run Gloo's threads under SCHED_BATCH: ") + std::strerror(errno);
    return;
  }
  restore_ = true;
}

BatchSchedulingScope::~BatchSchedulingScope() {
  if (!restore_) return;
  const sched_param zero{};
  ::sched_setscheduler(0, SCHED_OTHER, &zero);  // back from SCHED_BATCH: allowed without privileges
}

int batch_scheduled_threads() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return ::sched_getscheduler(0) == SCHED_BATCH ? 1 : 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9' &&
        (::sched_getscheduler(static_cast<pid_t>(std::atoi(e->d_name))) & ~SCHED_RESET_ON_FORK) == SCHED_BATCH)
      ++n;
  ::closedir(d);
  return n;
}

}  // namespace ddp
