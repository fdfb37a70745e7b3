#pragma once
// The trace commands: --export, --summary, --analyze, --digest and --diff read a finished (or crashed) run folder,
// or a PyTorch job's per-rank profiler traces, and start nothing; no LibTorch involved.
#include <string>

#include "runtime/common/command.h"

namespace ddp {
int run_export(const Command& cmd);
int run_summary(const Command& cmd);
int run_analyze(const Command& cmd);
int run_digest(const Command& cmd);
int run_diff(const Command& cmd);
int run_what_if(const Command& cmd);
}  // namespace ddp
