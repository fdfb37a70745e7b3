#pragma once
#include <string>
#include <vector>

#include "runtime/cli.h"

namespace ddp {
// Commands that read a finished (or crashed) run folder; no LibTorch involved.
int run_export(const Command& cmd);
int run_summary(const Command& cmd);
int run_analyze(const Command& cmd);
int run_diff(const Command& cmd);
// The closed-loop ladder (checks_run.cpp; starts real ranks and needs LibTorch for the reference).
int run_check(const Command& cmd, const std::vector<std::string>& job_args);
}  // namespace ddp
