#pragma once
// `ddp_profile --record`: starts the ranks (this binary re-executed with --worker and the rendezvous environment),
// watches their exits and heartbeats, and ends the run as a whole. The first rank to fail is the culprit: the others
// are sent SIGTERM (SIGKILL 3 s later), every trace is exported anyway, and the exit status is 1.
#include <string>
#include <vector>

#include "runtime/launch/cli.h"

namespace ddp {

struct RankOutcome {
  int rank = 0;
  int pid = 0;
  bool exited = false;
  int exit_code = 0;  // when exited normally
  int signal = 0;     // when killed by a signal
  double ended_after_fault_s = -1;  // seconds from the culprit's failure to this rank's exit
  std::string description;
};

struct RunOutcome {
  int exit_code = 0;
  int culprit = -1;  // -1: no failure
  std::string message;
  std::vector<RankOutcome> ranks;
  std::string run_dir;
};

// Runs one supervised job into cmd.out_dir (created). worker_args are the user's job options, passed to workers.
RunOutcome supervise_run(const Command& cmd, const std::vector<std::string>& worker_args, bool quiet);

// The CLI entry for --record.
int run_record(const Command& cmd, const std::vector<std::string>& args);

}  // namespace ddp
