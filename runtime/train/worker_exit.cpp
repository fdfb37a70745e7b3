#include "runtime/train/worker_exit.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <mutex>
#include <thread>

#include "profiler/gpu_activity.h"
#include "profiler/span.h"
#include "runtime/common/host_info.h"
#include "runtime/common/json_file.h"
#include "traces/model/run_folder.h"
#include "traces/model/stages.h"

namespace ddp {

RankExitIdentity& rank_exit_identity() {
  static RankExitIdentity id;
  return id;
}

ProgressWriter& rank_progress() {
  static ProgressWriter progress;
  return progress;
}

namespace {
// torchrun's error handler reads {"message": {"message": ..., "extraInfo": {"timestamp": ...}}} from the worker's
// error file and prints it in its failure summary (the py_callstack it would prefer is a Python traceback, which a
// C++ worker has none of: it then shows the message). Without the file it can only say "error_file: <N/A>".
// torchrun names the failure with the smallest timestamp its "Root Cause"; its timestamps are whole seconds, and a
// worker killed without an error file is dated when the agent gets round to it (up to a second later, in the next
// second), so a rank that failed only because its peer went away (a victim, necessarily later) is dated two seconds
// on: with equal seconds torchrun would blame whichever rank it lists first.
void write_launcher_error_file(const std::string& message, bool victim) {
  const RankExitIdentity& id = rank_exit_identity();
  if (id.error_file.empty()) return;
  constexpr long long kVictimDelayS = 2;
  const long long when = static_cast<long long>(std::time(nullptr)) + (victim ? kVictimDelayS : 0);
  nlohmann::json j = {{"message", {{"message", message}, {"extraInfo", {{"timestamp", std::to_string(when)}}}}}};
  std::string err;
  if (!write_json_atomic(id.error_file, j, err)) std::cerr << "ddp_profile: " << err << "\n";
}

// Where this rank is, from its heartbeat: "epoch E step S, stage X" (or "startup").
std::string where_now() {
  ProgressRecord* r = rank_progress().record();
  if (!r) return "startup";
  const int32_t stage = r->stage.load();
  return "epoch " + std::to_string(r->epoch.load()) + " step " + std::to_string(r->step.load()) + ", stage " +
         (stage >= 0 ? std::string(stage_name(static_cast<Stage>(stage))) : std::string("startup"));
}

// The run's status when a signal ended it under an outside launcher: what our supervisor writes after a failure,
// with the signal as the cause (scancel sends SIGTERM, then SIGKILL after Slurm's KillWait).
void write_ended_by_signal_status(const std::string& dir, int sig) {
  const std::string name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  const nlohmann::json st = {
      {"exit_code", 128 + sig},
      {"culprit", -1},
      {"signal", name},
      {"message", "the job was ended by " + name + " at " + where_now() +
                      (std::getenv("SLURM_JOB_ID") ? " (scancel, or the job's time limit)" : "") +
                      "; every rank's trace was flushed"}};
  std::string err;
  if (!write_json_atomic(in_run(dir, kRunStatusFile), st, err)) std::cerr << "ddp_profile: " << err << std::endl;
}

// The signal's number, from the handler (whichever thread the kernel picked) to the signal thread: a pipe, as
// write() is async-signal-safe.
int g_signal_pipe[2] = {-1, -1};
void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &b, 1);
}

std::mutex g_status_mutex;
std::string g_status_dir;

}  // namespace

void set_status_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_status_mutex);
  g_status_dir = dir;
}

// SIGTERM/SIGINT (the supervisor ending the run, scancel, a user's Ctrl-C) are handed by a handler to one thread,
// so the trace is flushed with ordinary code rather than from inside the handler. A handler, not a blocked mask and
// sigwait: threads that libraries start before main (OpenBLAS's, when no OPENBLAS_NUM_THREADS is set, as under
// srun) do not block the signals, and the kernel may deliver one to them, whose default action ends the process
// with nothing flushed.
void start_signal_thread() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;  // no pipe, no flush on a signal: the default action stays
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  std::thread([] {
    const RankExitIdentity& id = rank_exit_identity();
    unsigned char b = 0;
    while (::read(g_signal_pipe[0], &b, 1) != 1) {
    }
    const int sig = b;
    // Under torchrun the agent ends the surviving ranks when one fails, often before their collective notices: the
    // error file then says where this rank was, as a victim (the failed peer stays torchrun's root cause).
    write_launcher_error_file("rank " + std::to_string(id.rank) + " (" + host_name() + ") was ended by " +
                                  (sig == SIGTERM ? "SIGTERM" : "SIGINT") + " at " + where_now(),
                              /*victim=*/true);
    rank_progress().set_state(RankState::terminated);
    prof::gpu_flush();
    prof::flush();
    std::string dir;
    {
      std::lock_guard<std::mutex> lock(g_status_mutex);
      dir = g_status_dir;
    }
    if (!dir.empty()) write_ended_by_signal_status(dir, sig);
    std::fflush(stdout);
    ::_exit(128 + sig);
  }).detach();
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  // A peer killed while this rank writes to its socket: the write must fail (EPIPE), so that the collective throws
  // and this rank says which peer it lost, instead of SIGPIPE's default action ending it without a word (seen under
  // srun: "task 0: Broken pipe" and nothing from rank 0). Python ignores SIGPIPE for the same reason.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

[[noreturn]] void die(const std::string& what) {
  const RankExitIdentity& id = rank_exit_identity();
  const std::string line =
      "rank " + std::to_string(id.rank) + " (" + host_name() + ") failed at " + where_now() + ": " + what;
  std::cerr << "ddp_profile: " << line << std::endl;
  rank_progress().fail(what);
  write_launcher_error_file(line, looks_like_comm_error(what));
  prof::gpu_flush();
  prof::flush();
  std::fflush(stdout);
  ::_exit(1);
}

void maybe_inject_fault(const JobConfig& job, int rank, int64_t step) {
  // A restarted worker group (torchrun --max-restarts) runs without it: the rehearsal is of one failure and the
  // recovery from it, not of a fault that recurs on every attempt.
  if (job.fault.rank != rank || job.fault.step != step || rank_exit_identity().attempt > 0) return;
  const std::string& k = job.fault.kind;
  std::cerr << "ddp_profile: rank " << rank << ": injecting fault '" << k << "' at step " << step << std::endl;
  if (k == "throw") throw std::runtime_error("injected fault (throw) at step " + std::to_string(step));
  if (k == "kill") ::raise(SIGKILL);
  if (k == "exit0") {
    prof::flush();
    std::fflush(stdout);
    ::_exit(0);
  }
  if (k == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace ddp
