#pragma once
// How a supervised run ended: what the supervisor of our ranks (runtime/launch/supervisor/supervisor.h) and the launch
// of a user's script (runtime/launch/user_job/user_launch.h) report, and what faults.exit judges.
#include <string>
#include <vector>

namespace ddp {

struct RankOutcome {
  int rank = 0;
  int pid = 0;
  bool exited = false;
  int exit_code = 0;                // when exited normally
  int signal = 0;                   // when killed by a signal
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

}  // namespace ddp
