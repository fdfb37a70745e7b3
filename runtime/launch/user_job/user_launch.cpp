#include "runtime/launch/user_job/user_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "profiler/clock.h"
#include "runtime/launch/environment/loopback_port.h"
#include "runtime/launch/heartbeat/hang_watch.h"
#include "runtime/launch/heartbeat/progress.h"
#include "runtime/launch/user_job/companion_files.h"
#include "runtime/launch/user_job/hang_dumps.h"
#include "runtime/launch/user_job/user_job.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(20);
// After the first rank fails, how long the launcher gets to end the others on its own before we do: long enough
// to measure a launcher that takes too long (faults.exit allows 5 s), short enough not to leave orphans.
constexpr double kTeardownGraceS = 12;
constexpr double kLauncherGraceS = 5;  // a launcher sent SIGTERM has this long to end its ranks' step before SIGKILL
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Alive and not a zombie: a rank whose launcher has not reaped it yet has ended all the same.
bool process_alive(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

const char* state_name(RankState s) {
  switch (s) {
    case RankState::starting:
      return "starting";
    case RankState::running:
      return "running";
    case RankState::done:
      return "done";
    case RankState::failed:
      return "failed";
    case RankState::terminated:
      return "terminated";
  }
  return "unknown";
}

std::string where_of(const ProgressSnapshot& p) {
  return "step " + std::to_string(p.step) + ", " + (p.stage < 0 ? std::string("startup") : p.stage_name());
}

struct Watched {
  ProgressSnapshot beat;
  bool gone = false;
  double gone_after_s = -1;
};

// A companion of another version: its record would be misread, so the job is refused, naming both formats.
std::string format_mismatch_message(int rank, int theirs) {
  return "rank " + std::to_string(rank) + "'s companion writes heartbeat format " + std::to_string(theirs) +
         (theirs == 0 ? " (before versions)" : "") + ", this ddp_profile reads format " +
         std::to_string(kProgressFormatVersion) +
         ": use the companion of this ddp_profile (pip install the wheel it came in, docs/install.md)";
}

std::string hang_message(std::map<int, Watched>& ranks, int hung, double timeout_s) {
  std::string m = "rank " + std::to_string(hung) + " hung at " + where_of(ranks[hung].beat) + " (no progress for " +
                  std::to_string(static_cast<int>(timeout_s)) + " s";
  if (!ranks[hung].beat.reason.empty()) m += ": " + ranks[hung].beat.reason;
  m += ")";
  for (auto& [r, w] : ranks)
    if (r != hung) m += "; rank " + std::to_string(r) + " was at " + where_of(w.beat);
  return m;
}

// Every heartbeat the companion has created so far, by rank.
std::map<int, ProgressSnapshot> read_beats(const std::string& run_dir) {
  std::map<int, ProgressSnapshot> out;
  std::error_code ec;
  for (int r = 0; r < static_cast<int>(kMaxWorldSize); ++r) {
    const std::string p = in_run(run_dir, rank_progress_file(r));
    if (!fs::exists(p, ec)) break;
    ProgressSnapshot s = read_progress(p);
    if (s.present) out[r] = s;
  }
  return out;
}

// Copies the job's output into the log (and to our terminal when echoing) until the write end closes.
void pump(int fd, const std::string& log, bool echo) {
  std::ofstream out(log, std::ios::binary | std::ios::app);
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.write(buf, n);
    out.flush();
    if (echo) (void)!::write(STDERR_FILENO, buf, static_cast<size_t>(n));
  }
  ::close(fd);
}

// Starts LAUNCH in a process group of its own with the companion's switches, its output pumped into `log` by
// `reader`; -1 with `error` when it cannot be started (a command that cannot be executed is reported by the child
// through a pipe that exec closes, so the error is execvp's own).
pid_t start_job(const UserLaunch& launch, const std::string& log, std::thread& reader, std::string& error) {
  int exec_pipe[2], out_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  std::vector<char*> argv;
  for (const auto& a : launch.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (child == 0) {
    ::setpgid(0, 0);  // the whole job in one group: ended together, never our own process with it
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(out_pipe[1], STDERR_FILENO);
    for (const auto& [k, v] : launch.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::setenv(kEnvFormat, std::to_string(kProgressFormatVersion).c_str(), 1);  // the companion refuses another
    ::execvp(argv[0], argv.data());
    const int err = errno;
    (void)!::write(exec_pipe[1], &err, sizeof err);
    ::_exit(127);
  }
  ::setpgid(child, child);
  ::close(exec_pipe[1]);
  ::close(out_pipe[1]);
  reader = std::thread(pump, out_pipe[0], log, launch.echo);
  int exec_errno = 0;
  const bool exec_failed = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  ::close(exec_pipe[0]);
  if (exec_failed) {
    ::waitpid(child, nullptr, 0);
    reader.join();
    error = "cannot run " + launch.argv[0] + ": " + std::strerror(exec_errno);
    return -1;
  }
  return child;
}

std::string last_exception_line(const std::string& log) {
  static const std::regex kException(R"(^(\[[^\]]*\]:?\s*)?(([A-Za-z_][\w.]*)?(Error|Exception|Interrupt)\b.*)$)");
  std::ifstream in(log);
  std::string line, last;
  std::smatch m;
  // torchrun's own summary (torch.distributed.elastic's ChildFailedError) comes after the rank's traceback: the
  // rank's exception is the one the user wants.
  while (std::getline(in, line))
    if (std::regex_match(line, m, kException) && m[2].str().rfind("torch.distributed.elastic", 0) != 0)
      last = m[2].str();
  return last;
}
}  // namespace

bool launch_chooses_port(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  for (const std::string& a : argv)
    for (const char* opt : {"--master-port", "--master_port", "--rdzv-endpoint", "--rdzv_endpoint", "--standalone",
                            "--main_process_port"})  // the last: accelerate launch's
      if (a == opt || a.rfind(std::string(opt) + "=", 0) == 0) return true;
  for (const char* var : {kEnvTorchrunMasterPort, "PET_RDZV_ENDPOINT", "PET_STANDALONE"})
    if (env.count(var) || std::getenv(var)) return true;
  return false;
}

UserLaunchResult run_user_launch(const UserLaunch& given) {
  UserLaunch launch = given;
  if (!launch.env.count(kEnvTorchFrBufferSize) && !std::getenv(kEnvTorchFrBufferSize))
    launch.env[kEnvTorchFrBufferSize] = kFrBufferEntries;  // a hang's dumps (hang_dumps.h)
  if (!launch_chooses_port(launch.argv, launch.env)) {
    const int port = free_loopback_port();
    if (port > 0) launch.env[kEnvTorchrunMasterPort] = std::to_string(port);
  }
  UserLaunchResult res;
  // The companion of this ddp_profile, first on the job's PYTHONPATH: it comes into every Python process of the job
  // by itself, so the script needs no ddp_profile line (and one that has them gets this version's).
  const std::string companion = install_companion(launch.run_dir, res.error);
  if (companion.empty()) return res;
  const auto inherited = launch.env.find("PYTHONPATH");
  launch.env["PYTHONPATH"] = companion_python_path(
      companion, inherited != launch.env.end() ? inherited->second.c_str() : std::getenv("PYTHONPATH"));
  std::error_code ec;
  fs::create_directories(in_run(launch.run_dir, kLogsDir), ec);
  fs::create_directories(in_run(launch.run_dir, kProgressDir), ec);
  const std::string log = in_run(launch.run_dir, kLaunchLogFile);
  const auto t0 = Clock::now();
  std::thread reader;
  const pid_t child = start_job(launch, log, reader, res.error);
  if (child < 0) return res;
  res.started = true;

  std::map<int, Watched> ranks;
  bool exited = false, group_killed = false;
  int status = 0;
  Clock::time_point fault_at{};
  bool faulted = false;
  // The launch command's process group and every rank the heartbeats name, with their own groups: torchrun starts
  // its workers in sessions of their own, which a signal to our child's group does not reach.
  // The ranks die at once (SIGKILL: a crash is what the ladder rehearses); the launcher gets SIGTERM first, so that
  // srun ends its job step and releases the allocation (a SIGKILLed srun leaves its job running on the cluster,
  // holding the CPUs the next run waits for) and torchrun its agent, then SIGKILL when it has not gone in time.
  Clock::time_point group_killed_at{};
  auto kill_group = [&] {
    if (!group_killed) group_killed_at = Clock::now();
    const bool grace_over = std::chrono::duration<double>(Clock::now() - group_killed_at).count() > kLauncherGraceS;
    ::kill(-child, grace_over ? SIGKILL : SIGTERM);
    for (auto& [r, w] : ranks)
      if (!w.gone && w.beat.pid > 0) {
        ::kill(-w.beat.pid, SIGKILL);
        ::kill(w.beat.pid, SIGKILL);
      }
    group_killed = true;
  };
  auto note_fault = [&](int rank, const std::string& why) {
    if (faulted) return;
    faulted = true;
    fault_at = Clock::now();
    res.culprit = rank;
    res.message = why;
  };
  // The best culprit so far among the ranks that stopped (kept across polls while a lost peer's is held back).
  int first = -1;
  std::string first_why;
  Clock::time_point first_seen{};
  HangWatch hang_watch(launch.hang_timeout_s);  // the one hang rule (hang_watch.h)
  for (;;) {
    if (!exited && ::waitpid(child, &status, WNOHANG) == child) exited = true;
    // Ranks that failed or vanished since the last poll; when several did (a loaded machine polls late), the culprit
    // is the one that says why (an injected fault, an exception of its own), else one that died without a word (a
    // kill, a segfault), before one whose reason is a lost peer (its peer's end is what it reports); among equals,
    // the one that stopped first; a lost peer's only after kCulpritGraceS without another.
    for (auto& [r, b] : read_beats(launch.run_dir)) {
      Watched& w = ranks[r];
      w.beat = b;
      if (b.format_version != kProgressFormatVersion && !faulted) {
        note_fault(r, format_mismatch_message(r, b.format_version));
        res.killed_by_us = true;
        kill_group();
      }
      std::string why;
      if (!w.gone && b.pid > 0 && !process_alive(b.pid)) {
        w.gone = true;
        if (b.state != RankState::done)
          why = "rank " + std::to_string(r) + " (pid " + std::to_string(b.pid) + ") ended at ";
      } else if (!w.gone && b.state == RankState::failed) {
        why = "rank " + std::to_string(r) + " failed at ";
      }
      if (why.empty() || faulted) continue;
      if (first < 0 || blamed_before(b, ranks[first].beat)) {
        first = r;
        first_why = why + where_of(b) + (b.reason.empty() ? std::string() : ": " + b.reason);
      }
    }
    if (first >= 0 && !faulted) {
      if (first_seen == Clock::time_point{}) first_seen = Clock::now();
      if (blame_tier(ranks[first].beat) < 2 || seconds_since(first_seen) > kCulpritGraceS) note_fault(first, first_why);
    }
    for (auto& [r, w] : ranks)
      if (w.gone && w.gone_after_s < 0) w.gone_after_s = faulted ? seconds_since(fault_at) : 0;
    if (!faulted && launch.hang_timeout_s > 0 && !ranks.empty()) {
      const int64_t now_ns = prof::monotonic_ns();
      std::vector<RunningRank> running;
      for (auto& [r, w] : ranks)
        if (!w.gone && w.beat.state == RankState::running)
          running.push_back({r, w.beat, now_ns - w.beat.last_ns > 1000000000 && process_stopped(w.beat.pid)});
      double silent_s = 0;
      const int hung = hang_watch.poll(running, now_ns, silent_s);
      if (hung >= 0) {
        std::vector<int> alive;
        for (const auto& rr : running)
          if (!rr.process_stopped) alive.push_back(rr.rank);  // a stopped process cannot answer
        // Asked before the ranks are ended: their dumps say which collective the others wait in.
        note_fault(hung,
                   hang_message(ranks, hung, launch.hang_timeout_s) + "; " + hang_dump_verdict(launch.run_dir, alive));
        res.hung = true;
        res.killed_by_us = true;
        kill_group();
      }
    }
    if (!res.killed_by_us && launch.kill_when && launch.kill_when()) {
      res.killed_by_us = true;
      kill_group();
    }
    if (group_killed) kill_group();  // a rank the kill raced with (it re-read its heartbeat after)
    bool all_gone = true;
    for (auto& [r, w] : ranks) all_gone = all_gone && w.gone;
    // The launcher gone: a culprit held back (a lost peer's) is named now, no later poll will show another.
    if (exited && !faulted && first >= 0) note_fault(first, first_why);
    if (exited && all_gone) break;
    if (exited && !all_gone) {
      // The launcher is gone but a rank lingers: give it the grace period, then end it.
      if (!faulted) note_fault(-1, "the launch command exited while a rank was still running");
      if (seconds_since(fault_at) > kTeardownGraceS) kill_group();
    }
    if (faulted && seconds_since(fault_at) > kTeardownGraceS) kill_group();
    if (seconds_since(t0) > launch.time_limit_s) {
      if (!faulted) note_fault(-1, "the job ran past " + std::to_string(static_cast<int>(launch.time_limit_s)) + " s");
      res.killed_by_us = true;
      kill_group();
    }
    std::this_thread::sleep_for(kPoll);
  }
  reader.join();
  res.wall_s = seconds_since(t0);
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  for (auto& [r, w] : ranks)
    res.ranks.push_back({r, w.beat.pid, w.gone_after_s, where_of(w.beat), w.beat.step, state_name(w.beat.state)});
  res.last_error_line = last_exception_line(log);
  if (!faulted && res.exit_code != 0) res.message = "the launch command exited " + std::to_string(res.exit_code);
  return res;
}

}  // namespace ddp
