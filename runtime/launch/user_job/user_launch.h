#pragma once
// Runs the user's own launch command (torchrun, srun, mpirun, python ...) once, for `ddp_profile --check/--record --
// LAUNCH...`: in its own process group, with the companion switched on through DDP_PROFILE_* variables, its output
// kept in the run folder, every rank watched through the heartbeat the companion keeps (progress/rank<R>.bin, the
// same record our own ranks keep). The outer process is the one that can always see a hang and end the whole job.
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ddp {

struct UserLaunch {
  std::vector<std::string> argv;           // LAUNCH...
  std::string run_dir;                     // absolute; created before
  std::map<std::string, std::string> env;  // DDP_PROFILE_* added to the inherited environment
  bool echo = false;                       // also show the job's output on our stdout/stderr
  double hang_timeout_s = 0;               // > 0: a rank silent this long is hung (hang_watch.h); 0: no hang watch
  double time_limit_s = 600;               // the whole launch
  // Polled every 20 ms while the job runs; true = end the job now (SIGKILL to its process group), as a crash would.
  std::function<bool()> kill_when;
};

struct UserRankEnd {
  int rank = 0;
  int pid = 0;
  double gone_after_s = -1;  // seconds from the fault (the first rank to fail or hang) to this rank's end
  std::string where;         // "step 3, optimizer" from its heartbeat
  int64_t steps = 0;         // optimizer steps it had done (its heartbeat's step)
  std::string state;         // the heartbeat's last state: running, done, failed, ...
};

struct UserLaunchResult {
  bool started = false;  // false: LAUNCH could not be executed (error says why)
  std::string error;
  int exit_code = 0;          // the launch command's own exit code (128 + signal when killed)
  bool killed_by_us = false;  // kill_when fired, a hang was named, or the time limit passed
  bool hung = false;
  int culprit = -1;     // the first rank that failed or stopped making progress
  std::string message;  // what happened, naming the culprit, its step and stage
  std::vector<UserRankEnd> ranks;
  std::string last_error_line;  // the last Python exception line the job printed ("ValueError: ...")
  double wall_s = 0;
};

// Whether LAUNCH picks its own rendezvous port (torchrun's --master-port, --rdzv-endpoint or --standalone, or the
// PET_* variables torchrun reads them from, in `env` or ours). When it does not, each launch gets a free one through
// PET_MASTER_PORT: torchrun's default 29500 makes two ladders, or a ladder beside any other job, collide.
bool launch_chooses_port(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
inline const char* kEnvTorchrunMasterPort = "PET_MASTER_PORT";

UserLaunchResult run_user_launch(const UserLaunch& launch);

}  // namespace ddp
