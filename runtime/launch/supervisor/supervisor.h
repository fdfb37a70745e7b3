#pragma once
// `ddp_profile --record`: starts the ranks (this binary re-executed with --worker and the rendezvous environment),
// watches their exits and heartbeats, and ends the run as a whole. The first rank to fail is the culprit: the others
// are sent SIGTERM (SIGKILL 3 s later), every trace is exported anyway, and the exit status is 1.
#include <string>
#include <vector>

#include "runtime/common/run_outcome.h"
#include "runtime/launch/cli/cli.h"

namespace ddp {

// Runs one supervised job into cmd.out_dir (created). worker_args are the user's job options, passed to workers.
RunOutcome supervise_run(const Command& cmd, const std::vector<std::string>& worker_args, bool quiet);

// The CLI entry for --record.
int run_record(const Command& cmd, const std::vector<std::string>& args);

}  // namespace ddp
