#include "runtime/launch/supervisor/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "profiler/clock.h"
#include "runtime/common/json_file.h"
#include "runtime/common/run_folder_setup.h"
#include "runtime/data/dataset_cache.h"
#include "runtime/launch/cli/job_inputs.h"
#include "runtime/launch/environment/cpu_sets.h"
#include "runtime/launch/environment/loopback_port.h"
#include "runtime/launch/heartbeat/hang_watch.h"
#include "runtime/launch/heartbeat/progress.h"
#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"

namespace ddp {
namespace {

pid_t spawn_worker(int rank, int world, int port, const std::string& run_dir, const std::vector<std::string>& args,
                   bool quiet, const std::vector<int>& cpus) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: its own process group (so the supervisor can end it and anything it started), and it dies with us.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("DDP_PROFILE_LAUNCH", "supervisor", 1);
  // One BLAS/OpenMP thread per rank: two ranks share the cores; oversubscription would distort every span.
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
  if (!cpus.empty() && !pin_process(cpus))
    std::fprintf(stderr, "ddp_profile: rank %d: cannot pin to its cores\n", rank);
  if (rank != 0 || quiet) {
    std::string log = in_run(run_dir, rank_log_file(rank));
    int fd = ::open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      if (quiet) ::dup2(fd, 2);
    }
  }
  std::vector<std::string> argv_s = {"ddp_profile"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "ddp_profile: cannot re-execute itself as rank %d: %s\n", rank, std::strerror(errno));
  ::_exit(127);
}

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

// DIR/run_status.json: the run's verdict. A run whose verdict cannot be written has failed to say what happened: the
// exit code says so too.
void write_run_status(const std::string& dir, RunOutcome& out) {
  nlohmann::json st = {{"exit_code", out.exit_code}, {"culprit", out.culprit}, {"message", out.message}};
  for (const auto& o : out.ranks)
    st["ranks"].push_back(
        {{"rank", o.rank}, {"pid", o.pid}, {"exit", o.description}, {"ended_after_fault_s", o.ended_after_fault_s}});
  std::string err;
  if (!write_json_atomic(in_run(dir, kRunStatusFile), st, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    if (out.exit_code == 0) out.exit_code = 1;
    out.message += (out.message.empty() ? "" : "; ") + err;
  }
}

// Starts every rank (each pinned to its share of the cores unless --no-pin); on a failure ends the ones started and
// says which could not start.
bool spawn_ranks(const JobConfig& job, int port, const std::string& dir, const std::vector<std::string>& args,
                 bool quiet, std::vector<RankOutcome>& ranks, std::vector<pid_t>& pids, std::string& error) {
  const int world = job.nproc;
  const std::vector<std::vector<int>> cpu_sets =
      job.pin_cpus ? rank_cpu_sets(allowed_cpus(), world) : std::vector<std::vector<int>>{};
  for (int r = 0; r < world; ++r) {
    ranks[r].rank = r;
    pids[r] = spawn_worker(r, world, port, dir, args, quiet, cpu_sets.empty() ? std::vector<int>{} : cpu_sets[r]);
    ranks[r].pid = pids[r];
    if (pids[r] < 0) {
      error = "cannot start rank " + std::to_string(r) + ": " + std::strerror(errno);
      for (int k = 0; k < r; ++k) ::kill(-pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) ::waitpid(pids[k], nullptr, 0);
      return false;
    }
  }
  return true;
}

// Ctrl-C / SIGTERM to the supervisor: the ranks are ended like after a failure (SIGTERM, so they flush their
// traces), the traces are exported, and the run exits 130.
volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int sig) { g_interrupted = sig; }

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

RunOutcome supervise_run(const Command& cmd, const std::vector<std::string>& worker_args, bool quiet) {
  RunOutcome out;
  const JobConfig& job = cmd.job;
  const std::string dir = cmd.out_dir;
  out.run_dir = dir;
  const int world = job.nproc;
  int port = free_loopback_port();
  if (port <= 0) {
    out.exit_code = 1;
    out.message = "cannot find a free TCP port on 127.0.0.1 for the rendezvous";
    return out;
  }
  std::vector<std::string> args = worker_args;
  args.insert(args.end(), {"--worker", "--out", dir, "--data", job.data_path});

  std::vector<RankOutcome> ranks(world);
  std::vector<pid_t> pids(world);
  if (!spawn_ranks(job, port, dir, args, quiet, ranks, pids, out.message)) {
    out.exit_code = 1;
    return out;
  }

  using clock = std::chrono::steady_clock;
  int alive = world;
  int culprit = -1;
  std::string culprit_reason;
  clock::time_point first_failure{}, terminate_sent{}, fault_time{};
  bool failure_seen = false, terminating = false, killed = false, hang_seen = false;
  std::vector<clock::time_point> exit_time(world);
  std::vector<ProgressSnapshot> last_progress(world);
  HangWatch hang_watch(job.hang_timeout_s);

  auto progress_of = [&](int r) { return read_progress(progress_file(dir, r)); };
  auto rank_of = [&](pid_t p) {
    for (int r = 0; r < world; ++r)
      if (pids[r] == p) return r;
    return -1;
  };

  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  g_interrupted = 0;
  bool interrupted = false;
  while (alive > 0) {
    if (g_interrupted && !terminating) {
      interrupted = true;
      terminating = true;
      terminate_sent = clock::now();
      for (int r = 0; r < world; ++r)
        if (!ranks[r].exited) ::kill(-pids[r], SIGTERM);
    }
    // Reap exits.
    int status = 0;
    pid_t p;
    while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) {
      int r = rank_of(p);
      if (r < 0) continue;
      RankOutcome& o = ranks[r];
      o.exited = true;
      exit_time[r] = clock::now();
      if (WIFSIGNALED(status))
        o.signal = WTERMSIG(status);
      else
        o.exit_code = WEXITSTATUS(status);
      last_progress[r] = progress_of(r);
      --alive;
      bool ok = !o.signal && o.exit_code == 0 && last_progress[r].state == RankState::done;
      if (!ok && !terminating && !failure_seen && !interrupted) {
        failure_seen = true;
        first_failure = clock::now();
      }
    }
    auto now = clock::now();
    // Heartbeats: a rank that stopped making progress counts as failed (the one hang rule: hang_watch.h).
    if (!failure_seen && !terminating) {
      const int64_t now_ns = prof::monotonic_ns();
      std::vector<ProgressSnapshot> snap(world);
      std::vector<RunningRank> running;
      for (int r = 0; r < world; ++r) {
        if (ranks[r].exited) continue;
        snap[r] = progress_of(r);
        if (!snap[r].present || snap[r].state != RankState::running) continue;
        // /proc is read only for a rank silent for a second: a stopped process is one that has gone silent.
        const bool silent = now_ns - snap[r].last_ns > 1000000000;
        running.push_back({r, snap[r], silent && process_stopped(pids[r])});
      }
      double silent_s = 0;
      const int hung = hang_watch.poll(running, now_ns, silent_s);
      if (hung >= 0) {
        culprit = hung;
        hang_seen = true;
        culprit_reason = describe_hang(hung, snap, pids, now_ns);
        failure_seen = true;
        first_failure = now;
        fault_time = clock::now() - std::chrono::milliseconds(static_cast<int64_t>(silent_s * 1e3));
      }
    }
    // After a short grace period (the peer's reaction to a failure can be reaped first), pick the culprit and end
    // every remaining rank.
    if (failure_seen && !terminating &&
        (culprit >= 0 || now - first_failure > std::chrono::duration<double>(kCulpritGraceS) || alive == 0)) {
      if (culprit < 0) {
        culprit = first_failed_rank(ranks, last_progress);
        if (culprit >= 0) {
          culprit_reason = failure_reason(ranks[culprit], last_progress[culprit]);
          fault_time = exit_time[culprit];
        }
      }
      terminating = true;
      terminate_sent = clock::now();
      for (int r = 0; r < world; ++r)
        if (!ranks[r].exited) ::kill(-pids[r], SIGTERM);
    }
    if (terminating && !killed && clock::now() - terminate_sent > std::chrono::seconds(3)) {
      killed = true;
      for (int r = 0; r < world; ++r)
        if (!ranks[r].exited) ::kill(-pids[r], SIGKILL);
    }
    if (alive > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  // Whatever the ranks started in their process groups goes too.
  for (int r = 0; r < world; ++r) ::kill(-pids[r], SIGKILL);

  out.culprit = culprit;
  for (int r = 0; r < world; ++r) {
    RankOutcome& o = ranks[r];
    o.description = describe_exit(o);
    if (culprit >= 0)
      o.ended_after_fault_s = std::max(0.0, std::chrono::duration<double>(exit_time[r] - fault_time).count());
  }
  out.ranks = ranks;
  if (interrupted && !failure_seen) {
    out.exit_code = 130;
    out.message = "interrupted: every rank was ended and its trace flushed";
  } else if (failure_seen) {
    out.exit_code = 1;
    // A rank that rejected the job options (its usage error is on stderr) makes the whole run a usage error.
    if (culprit >= 0 && !ranks[culprit].signal && ranks[culprit].exit_code == 2 &&
        last_progress[culprit].state == RankState::starting)
      out.exit_code = 2;
    out.message = failure_message(ranks, culprit, culprit_reason, hang_seen);
  }
  write_run_status(dir, out);
  return out;
}

int run_record(const Command& cmd_in, const std::vector<std::string>& args) {
  Command cmd = cmd_in;
  cmd.out_dir = record_run_folder(cmd.out_dir);
  std::string error;
  if (!prepare_run_folder(cmd.out_dir, error)) {
    std::cerr << "ddp_profile: " << error << "\n";
    return 1;
  }
  if (!validate_job_inputs(cmd.job, error)) {
    std::cerr << "ddp_profile: " << error << "\n";
    return 2;  // the user's input, refused before any rank starts
  }
  const DatasetPath where = dataset_path_source(cmd.job);
  if (cmd.job.data_path.empty()) cmd.job.data_path = default_data_path(cmd.out_dir, cmd.job);
  cmd.job.data_path = absolute_path(cmd.job.data_path);
  if (!ensure_dataset(cmd.job, where, error, true)) {
    std::cerr << "ddp_profile: " << error << "\n";
    return 2;  // the user's input, refused before any rank starts
  }
  std::cout << "recording " << cmd.job.nproc << " ranks into " << cmd.out_dir << std::endl;
  RunOutcome r = supervise_run(cmd, args, false);
  if (r.exit_code == 2) return 2;  // the ranks said why
  if (r.exit_code != 0) std::cerr << "ddp_profile: " << r.message << "\n";
  if (cmd.job.record) {
    RunTrace run;
    ExportStats stats;
    std::string err;
    std::string path = cmd.out_dir + "/" + kChromeTraceFile;
    if (load_run(cmd.out_dir, run, err) && export_chrome(run, path, stats, err)) {
      std::cout << "trace: " << path << " (" << stats.events << " events";
      if (!run.problems.empty()) std::cout << "; " << run.problems.size() << " problem(s): " << run.problems.front();
      std::cout << ")\n";
    } else {
      std::cerr << "ddp_profile: export failed: " << err << "\n";
      if (r.exit_code == 0) r.exit_code = 1;
    }
  }
  std::cout << "run folder: " << cmd.out_dir << (r.exit_code == 0 ? "" : " (run failed)") << std::endl;
  return r.exit_code;
}

}  // namespace ddp
