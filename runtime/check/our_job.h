#pragma once
// The subject under check that is our own job: ranks this binary starts under its supervisor, with the job options
// of the command line. Needs LibTorch (the single-rank reference, the checkpoints' trees).
#include <string>
#include <vector>

#include "runtime/launch/cli/cli.h"

namespace ddp {
// `ddp_profile --check [job options]`: the ladder on our own job -> DIR/checks.json.
int run_check(const Command& cmd, const std::vector<std::string>& job_args);
}  // namespace ddp
