#include "runtime/launch/supervisor/rank_watch.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "profiler/clock.h"
#include "runtime/launch/heartbeat/progress.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace {

bool is_collective_stage(int32_t stage) {
  return stage >= 0 && stage < kStageCount && stage_has(static_cast<Stage>(stage), kStageBlocksOnPeers);
}

// What every rank was doing when `hung` stopped making progress: "stopped in forward at step 605 for 10.0 s; rank 0
// waits in allreduce (bucket 0, step 605)". The collective a peer waits in says which rank it waits for; the hung
// rank's stage says why it never arrived.
std::string describe_hang(int hung, const std::vector<ProgressSnapshot>& snap, const std::vector<pid_t>& pids,
                          int64_t now_ns) {
  auto idle = [&](const ProgressSnapshot& s) { return static_cast<double>(now_ns - s.last_ns) / 1e9; };
  char buf[256];
  const ProgressSnapshot& h = snap[hung];
  std::snprintf(buf, sizeof(buf), "stopped in %s at step %lld for %.1f s", h.stage_name().c_str(),
                static_cast<long long>(h.step), idle(h));
  std::string text = buf;
  if (process_stopped(pids[hung])) text += " (its process is stopped: SIGSTOP or a debugger)";
  for (size_t r = 0; r < snap.size(); ++r) {
    if (static_cast<int>(r) == hung) continue;
    const ProgressSnapshot& s = snap[r];
    if (!s.present)
      std::snprintf(buf, sizeof(buf), "; rank %zu has not started", r);
    else if (s.state == RankState::done)
      std::snprintf(buf, sizeof(buf), "; rank %zu had finished", r);
    else if (is_collective_stage(s.stage) && s.bucket >= 0)
      std::snprintf(buf, sizeof(buf), "; rank %zu waits in allreduce (bucket %d, step %lld)", r, s.bucket,
                    static_cast<long long>(s.step));
    else if (is_collective_stage(s.stage))
      std::snprintf(buf, sizeof(buf), "; rank %zu waits in %s (step %lld)", r, s.stage_name().c_str(),
                    static_cast<long long>(s.step));
    else
      std::snprintf(buf, sizeof(buf), "; rank %zu is in %s at step %lld (last progress %.1f s ago)", r,
                    s.stage_name().c_str(), static_cast<long long>(s.step), idle(s));
    text += buf;
  }
  return text;
}

// The run's one line on a failure: the culprit and why, then how long each other rank took to end after the fault.
std::string failure_message(const std::vector<RankOutcome>& ranks, int culprit, const std::string& reason, bool hung) {
  std::string text = hung           ? "rank " + std::to_string(culprit) + " " + reason
                     : culprit >= 0 ? "rank " + std::to_string(culprit) + " failed: " + reason
                                    : std::string("the run failed");
  for (const RankOutcome& o : ranks)
    if (o.rank != culprit) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "; rank %d was ended (%s) %.2f s after the fault", o.rank, o.description.c_str(),
                    o.ended_after_fault_s);
      text += buf;
    }
  return text;
}

std::string describe_exit(const RankOutcome& o) {
  if (o.signal) {
    const char* abbrev = sigabbrev_np(o.signal);
    return "killed by signal " + std::to_string(o.signal) + " (SIG" + (abbrev ? abbrev : "?") + ")";
  }
  return "exited with status " + std::to_string(o.exit_code);
}

// Of the ranks that ended without finishing, the one to blame (hang_watch.h's blame order); -1 when none failed.
int first_failed_rank(const std::vector<RankOutcome>& ranks, const std::vector<ProgressSnapshot>& last_progress) {
  int culprit = -1;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankOutcome& o = ranks[r];
    if (!o.exited) continue;
    const ProgressSnapshot& s = last_progress[r];
    if (!o.signal && o.exit_code == 0 && s.state == RankState::done) continue;
    if (culprit < 0 || blamed_before(s, last_progress[culprit])) culprit = static_cast<int>(r);
  }
  return culprit;
}

// Why a failed rank ended, and where: its own reason, an early clean exit, or its exit status or signal.
std::string failure_reason(const RankOutcome& o, const ProgressSnapshot& s) {
  const std::string where =
      "at epoch " + std::to_string(s.epoch) + " step " + std::to_string(s.step) + ", stage " + s.stage_name();
  if (!s.reason.empty()) return s.reason + " (" + where + ")";
  if (!o.signal && o.exit_code == 0) return "exited early with status 0 before finishing, " + where;
  return describe_exit(o) + ", " + where;
}

}  // namespace

RankWatch::RankWatch(std::string run_dir, double hang_timeout_s, std::vector<RankOutcome> ranks,
                     std::vector<pid_t> pids)
    : dir_(std::move(run_dir)),
      ranks_(std::move(ranks)),
      pids_(std::move(pids)),
      alive_(static_cast<int>(ranks_.size())),
      exit_time_(ranks_.size()),
      last_progress_(ranks_.size()),
      hang_watch_(hang_timeout_s) {}

void RankWatch::poll(bool interrupt_requested) {
  if (interrupt_requested && !terminating_) {
    interrupted_ = true;
    terminating_ = true;
    terminate_sent_ = clock::now();
    signal_alive(SIGTERM);
  }
  reap_exits();
  if (!failure_seen_ && !terminating_) watch_heartbeats();
  if (failure_seen_ && !terminating_) end_after_failure();
  if (terminating_ && !killed_ && clock::now() - terminate_sent_ > std::chrono::duration<double>(kKillAfterS)) {
    killed_ = true;
    signal_alive(SIGKILL);
  }
}

void RankWatch::signal_alive(int sig) {
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (!ranks_[r].exited) ::kill(-pids_[r], sig);
}

void RankWatch::mark_failure(clock::time_point when) {
  failure_seen_ = true;
  first_failure_ = when;
}

void RankWatch::reap_exits() {
  int status = 0;
  pid_t p;
  while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) {
    int r = -1;
    for (size_t k = 0; k < pids_.size(); ++k)
      if (pids_[k] == p) r = static_cast<int>(k);
    if (r < 0) continue;
    RankOutcome& o = ranks_[r];
    o.exited = true;
    exit_time_[r] = clock::now();
    if (WIFSIGNALED(status))
      o.signal = WTERMSIG(status);
    else
      o.exit_code = WEXITSTATUS(status);
    last_progress_[r] = read_progress(progress_file(dir_, r));
    --alive_;
    const bool ok = !o.signal && o.exit_code == 0 && last_progress_[r].state == RankState::done;
    if (!ok && !terminating_ && !failure_seen_ && !interrupted_) mark_failure(clock::now());
  }
}

// A rank that stopped making progress counts as failed (the one hang rule: hang_watch.h).
void RankWatch::watch_heartbeats() {
  const int64_t now_ns = prof::monotonic_ns();
  const auto now = clock::now();
  std::vector<ProgressSnapshot> snap(ranks_.size());
  std::vector<RunningRank> running;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].exited) continue;
    snap[r] = read_progress(progress_file(dir_, static_cast<int>(r)));
    if (!snap[r].present || snap[r].state != RankState::running) continue;
    // /proc is read only for a rank silent for a while: a stopped process is one that has gone silent.
    const bool silent = now_ns - snap[r].last_ns > kSilentBeforeStopCheckNs;
    running.push_back({static_cast<int>(r), snap[r], silent && process_stopped(pids_[r])});
  }
  double silent_s = 0;
  const int hung = hang_watch_.poll(running, now_ns, silent_s);
  if (hung < 0) return;
  culprit_ = hung;
  hang_seen_ = true;
  culprit_reason_ = describe_hang(hung, snap, pids_, now_ns);
  mark_failure(now);
  fault_time_ = clock::now() - std::chrono::milliseconds(static_cast<int64_t>(silent_s * 1e3));
}

// After a short grace (the peer's reaction to a failure can be reaped first), the culprit is picked and every
// remaining rank is ended.
void RankWatch::end_after_failure() {
  const bool grace_over = clock::now() - first_failure_ > std::chrono::duration<double>(kCulpritGraceS);
  if (culprit_ < 0 && !grace_over && alive_ > 0) return;
  if (culprit_ < 0) {
    culprit_ = first_failed_rank(ranks_, last_progress_);
    if (culprit_ >= 0) {
      culprit_reason_ = failure_reason(ranks_[culprit_], last_progress_[culprit_]);
      fault_time_ = exit_time_[culprit_];
    }
  }
  terminating_ = true;
  terminate_sent_ = clock::now();
  signal_alive(SIGTERM);
}

RunOutcome RankWatch::finish() {
  for (pid_t pid : pids_) ::kill(-pid, SIGKILL);
  RunOutcome out;
  out.culprit = culprit_;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    RankOutcome& o = ranks_[r];
    o.description = describe_exit(o);
    if (culprit_ >= 0)
      o.ended_after_fault_s = std::max(0.0, std::chrono::duration<double>(exit_time_[r] - fault_time_).count());
  }
  out.ranks = ranks_;
  if (interrupted_ && !failure_seen_) {
    out.exit_code = 130;
    out.message = "interrupted: every rank was ended and its trace flushed";
  } else if (failure_seen_) {
    out.exit_code = 1;
    // A rank that rejected the job options (its usage error is on stderr) makes the whole run a usage error.
    if (culprit_ >= 0 && !ranks_[culprit_].signal && ranks_[culprit_].exit_code == 2 &&
        last_progress_[culprit_].state == RankState::starting)
      out.exit_code = 2;
    out.message = failure_message(ranks_, culprit_, culprit_reason_, hang_seen_);
  }
  return out;
}

}  // namespace ddp
