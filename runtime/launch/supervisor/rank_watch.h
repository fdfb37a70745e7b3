#pragma once
// The supervisor's watch over the ranks it started, one poll at a time: their exits reaped, their heartbeats read
// (hang_watch.h's one hang rule), the culprit picked after kCulpritGraceS, the others ended (SIGTERM, so they flush
// their traces; SIGKILL kKillAfterS later). supervisor.cpp starts the ranks and polls this until none is left.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/common/run_outcome.h"
#include "runtime/launch/heartbeat/hang_watch.h"

namespace ddp {

class RankWatch {
 public:
  // How often the supervisor polls: short beside the culprit's grace (1 s) and the 5 s within which the product
  // promises to end the others after a rank's death.
  static constexpr std::chrono::milliseconds kPollInterval{20};
  // SIGTERM lets a rank flush its trace; one still alive this long after is killed.
  static constexpr double kKillAfterS = 3;
  // A heartbeat silent this long makes the watch read /proc for a stopped process (SIGSTOP, a debugger).
  static constexpr int64_t kSilentBeforeStopCheckNs = 1000000000;

  // `ranks` and `pids` as spawn_ranks filled them, one per rank; the heartbeats are read from `run_dir`.
  RankWatch(std::string run_dir, double hang_timeout_s, std::vector<RankOutcome> ranks, std::vector<pid_t> pids);
  // One look: an interrupt ends every rank; exits are reaped; a hang or a failure picks a culprit and ends the rest.
  void poll(bool interrupt_requested);
  bool any_alive() const { return alive_ > 0; }
  // After the last rank ended: whatever the ranks started in their process groups is killed too, and the run's
  // outcome (exit code, culprit, message, each rank's end) is said.
  RunOutcome finish();

 private:
  void reap_exits();
  void watch_heartbeats();
  void end_after_failure();
  void signal_alive(int sig);
  void mark_failure(std::chrono::steady_clock::time_point when);

  using clock = std::chrono::steady_clock;
  std::string dir_;
  std::vector<RankOutcome> ranks_;
  std::vector<pid_t> pids_;
  int alive_ = 0;
  int culprit_ = -1;
  std::string culprit_reason_;
  clock::time_point first_failure_{}, terminate_sent_{}, fault_time_{};
  bool failure_seen_ = false, terminating_ = false, killed_ = false, hang_seen_ = false, interrupted_ = false;
  std::vector<clock::time_point> exit_time_;
  std::vector<ProgressSnapshot> last_progress_;
  HangWatch hang_watch_;
};

}  // namespace ddp
