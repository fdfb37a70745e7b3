#pragma once
// The subject under check that is the user's own training script: their launch command (torchrun, srun, mpirun,
// python ...) run as often as the ladder needs, each time into its own folder, with the Python companion recording
// (runtime/launch/user_job/user_launch.h starts and watches it; docs/python.md).
#include "runtime/launch/user_job/user_job.h"

namespace ddp {
// `ddp_profile --check [--resume-arg T] [--checks IDS] -- LAUNCH...`: the ladder on the user's script.
int run_user_check(const UserJobCommand& cmd);
}  // namespace ddp
