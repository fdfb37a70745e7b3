#!/usr/bin/env bash
# A "launch command" for `ddp_profile --check -- bash replay_run.sh RECORDED`: instead of running a job, it puts a
# recorded check's files where the companion would write them ($DDP_PROFILE_RUN), so the ladder judges that recording
# again (tests/data/golden/commands.txt; the contract tests plant damaged fields in a copy the same way). RECORDED
# holds one folder per run of the ladder, named as the ladder names them (main, resume_straight, resume_killed,
# resume_resumed); arguments after RECORDED (a resume's checkpoint) are the job's, and ignored.
set -euo pipefail
cp -a "$1/$(basename "$DDP_PROFILE_RUN")"/. "$DDP_PROFILE_RUN"/
