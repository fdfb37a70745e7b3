#!/usr/bin/env bash
# Records the golden inputs commands.txt runs on, with a full build (build/) and the torch venv
# (scripts/torchrun_venv.sh), then writes their answers (expect.sh). Recorded on 2026-12-07 on a 2-core machine of
# this project's kind with the build of 9e6b703 (the answers before the manifest became a typed record).
#   ours_balanced       our job, one epoch (78 steps), defaults
#   ours_slow_forward   the same with rank 1's forward 4 ms slower (a sleep: --slow rank=1,stage=forward,ms=4)
#   user_slow_read      tests/python/user_scripts/datapath_job.py under --record -- torchrun (2 ranks, 2 loader
#                       workers each, rank 1 reading its files 3 ms slower); its Kineto traces left out (1 MB)
#   user_check          --check -- torchrun tests/python/user_scripts/unmodified_job.py --attach: its main run (the
#                       verify/ logs and dumps, the checkpoint) and checkpoint.resume's three runs, a folder each as
#                       the ladder names them, replayed into the ladder by replay_run.sh
# Only what the commands read is kept: no trace.json (an answer), logs, heartbeats or the embedded companion.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
exe=$root/build/runtime/ddp_profile
torchrun=${DDP_TORCHRUN:-${DDP_CACHE:-$HOME/.cache/ddp_profile}/torchvenv/bin/torchrun}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
rm -rf "$here"/{ours_balanced,ours_slow_forward,user_slow_read,user_check}
"$exe" --record --out "$here/ours_balanced" --epochs 1 --data "$work/data.ddpd"
"$exe" --record --out "$here/ours_slow_forward" --epochs 1 --slow rank=1,stage=forward,ms=4 --data "$work/data.ddpd"
"$exe" --record --out "$here/user_slow_read" -- "$torchrun" --nproc-per-node 2 \
  "$root/tests/python/user_scripts/datapath_job.py" --slow-read 1:3 --workers 2 --data "$work/images"
checks=env.manifest,data.shard_rule,data.same_dataset,train.learns,numerics.finite,train.mode,train.schedule
checks=$checks,train.iteration,numerics.reference,numerics.rank_sync,memory.steady,comm.no_sync,checkpoint.complete
"$exe" --check --checks "$checks" --out "$work/check" -- "$torchrun" --nproc-per-node 2 \
  "$root/tests/python/user_scripts/unmodified_job.py" --attach --snapshot "$work/snap.pt"
"$exe" --check --checks checkpoint.resume --resume-arg '--resume {ckpt}' --out "$work/resume" -- "$torchrun" \
  --nproc-per-node 2 "$root/tests/python/user_scripts/unmodified_job.py" --attach --snapshot "$work/snap2.pt"
mkdir -p "$here/user_check/main"
cp -a "$work/check/main/verify" "$work/check/main/checkpoints" "$here/user_check/main/"
for leg in resume_straight resume_killed resume_resumed; do
  mkdir -p "$here/user_check/$leg"
  cp -a "$work/resume/$leg/verify" "$work/resume/$leg/checkpoints" "$here/user_check/$leg/"
done
for run in ours_balanced ours_slow_forward user_slow_read; do
  rm -rf "$here/$run"/{trace.json,logs,progress,companion} "$here/$run"/*.pt.trace.json
done
bash "$here/expect.sh" "$exe"
