#pragma once
// The rules both watchers of the ranks' heartbeats apply: the supervisor of our own ranks (supervisor.cpp) and the
// launch of a user's script (user_launch.cpp). One hang rule, one blame order, one clock (CLOCK_MONOTONIC, the
// heartbeat's); each watcher keeps only how it starts and ends its processes.
#include <chrono>
#include <cstdint>
#include <vector>

#include "runtime/launch/heartbeat/progress.h"

namespace ddp {

// Which of several ranks that ended without finishing to name as the culprit: one that says why (its own error),
// then one that died without a word (a kill, a segfault), then one whose reason is a lost peer (the effect of
// another rank's end, not a cause); among equals the one that stopped first. True when a is to blame before b.
int blame_tier(const ProgressSnapshot& s);  // 0, 1, 2 as above
// How long a watcher waits, after the first rank fails, for a better culprit than that one: a rank whose failure is a
// lost peer is the effect of another rank's end, which a loaded machine may show only a poll or two later (the
// peer's death, its own reason); the process that ended first may be reaped after its peer's reaction.
inline constexpr double kCulpritGraceS = 1;
bool blamed_before(const ProgressSnapshot& a, const ProgressSnapshot& b);

// A process stopped by a signal (SIGSTOP, SIGTSTP) or held by a debugger: state T or t in /proc/PID/stat.
bool process_stopped(int pid);

// A rank still running, as a watcher sees it in one poll.
struct RunningRank {
  int rank = 0;
  ProgressSnapshot beat;
  bool process_stopped = false;  // SIGSTOP or a debugger: the culprit before anyone
};

// Calls a hang. A running rank is silent past the limit: the user's --hang-timeout when given, else adaptive
// (progress.h, hang_timeout_s: 20 median steps, at least 10 s, 60 s before the first step; a rank saving a
// checkpoint gets the first step's allowance). Of the silent ranks the culprit is a stopped process, then one that
// says why (an injected fault), then one not waiting in a collective (the others are its victims), then the one
// furthest behind, then the one silent longest. A rank in a collective while a peer is still busy elsewhere is that
// peer's victim and is named only at twice the limit. A hang is called only when a second look kConfirmS later still
// sees the same newest progress: a heartbeat can be read half-written by a rank descheduled mid-write.
class HangWatch {
 public:
  static constexpr double kConfirmS = 0.5;
  explicit HangWatch(double user_timeout_s) : user_timeout_s_(user_timeout_s) {}
  // The hung rank, or -1; `silent_s` is its silence when one is named.
  int poll(const std::vector<RunningRank>& running, int64_t now_ns, double& silent_s);
  double timeout_s() const { return timeout_s_; }

 private:
  double user_timeout_s_;
  double timeout_s_ = 0;
  bool seen_ = false;
  int64_t seen_newest_ns_ = 0;
  std::chrono::steady_clock::time_point seen_at_{};
};

}  // namespace ddp
