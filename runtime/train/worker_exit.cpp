#include "runtime/train/worker_exit.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <thread>

#include "profiler/gpu_activity.h"
#include "profiler/span.h"
#include "runtime/common/host_info.h"
#include "runtime/common/json_file.h"
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
}  // namespace

// SIGTERM/SIGINT (the supervisor ending the run, or a user's Ctrl-C) are taken by one thread with sigwait, so the
// trace is flushed with ordinary code rather than from inside a signal handler.
void start_signal_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread created after this
  std::thread([set] {
    const RankExitIdentity& id = rank_exit_identity();
    int sig = 0;
    sigwait(&set, &sig);
    // Under torchrun the agent ends the surviving ranks when one fails, often before their collective notices: the
    // error file then says where this rank was, as a victim (the failed peer stays torchrun's root cause).
    write_launcher_error_file("rank " + std::to_string(id.rank) + " (" + host_name() + ") was ended by " +
                                  (sig == SIGTERM ? "SIGTERM" : "SIGINT") + " at " + where_now(),
                              /*victim=*/true);
    rank_progress().set_state(RankState::terminated);
    prof::gpu_flush();
    prof::flush();
    std::fflush(stdout);
    ::_exit(128 + sig);
  }).detach();
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
