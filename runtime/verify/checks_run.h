#pragma once
#include <string>
#include <vector>

#include "runtime/launch/cli.h"

namespace ddp {
// `ddp_profile --check`: the closed-loop ladder. Starts real ranks and needs LibTorch for the single-rank reference.
int run_check(const Command& cmd, const std::vector<std::string>& job_args);
}  // namespace ddp
