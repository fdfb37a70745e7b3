#!/usr/bin/env bash
# A "launch command" for `ddp_profile --check -- bash replay_run.sh RECORDED`: instead of running a job, it puts a
# recorded run's files where the companion would write them ($DDP_PROFILE_RUN), so the ladder judges that recording
# again (tests/data/golden/commands.txt; the contract tests plant damaged fields in a copy the same way).
set -euo pipefail
cp -a "$1"/. "$DDP_PROFILE_RUN"/
