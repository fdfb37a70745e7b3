#pragma once
#include <string>

#include "runtime/launch/cli.h"

namespace ddp {
// Commands that read a finished (or crashed) run folder; no LibTorch involved.
int run_export(const Command& cmd);
int run_summary(const Command& cmd);
int run_analyze(const Command& cmd);
int run_diff(const Command& cmd);
}  // namespace ddp
