#!/usr/bin/env bash
# Recording overhead on the GPU as a function of how launch-bound the step is: the same job shape at two sizes,
# each run --no-record, recorded (--cuda-trace api, the default), and with --cuda-trace gpu, interleaved so drift
# hits all three alike. Prints the median step time of each and the ratios to --no-record measured in this run.
# Needs a GPU machine and the bundle (bench/device_bundle.sh -> .device/); run from the checkout's root.
#
#   bash bench/device_overhead.sh            # STEPS=60 by default
set -uo pipefail
cd "$(dirname "$0")/.."
exe=${DDP_BUILD:-.device}/ddp_profile
steps=${STEPS:-60}
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
libs=$torch_lib
for d in "$torch_lib"/../../nvidia/*/lib /usr/local/cuda/lib64 "${DDP_BUILD:-.device}/lib"; do [ -d "$d" ] && libs=$libs:$(cd "$d" && pwd); done
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=$(mktemp -d /tmp/ddp_overhead.XXXXXX)
median() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ranks"][0]["step_time_median_ms"])' "$1/manifest.json"; }
# small: the device check's job (launch-bound: ~20 us of host time per kernel); large: 16x the math per kernel.
for size in "small:--features 1024 --hidden 2048 --batch-size 512" "large:--features 4096 --hidden 16384 --batch-size 2048"; do
  name=${size%%:*}
  job=(--dataset-size 16384 --workers 4 --prefetch 4 --max-steps "$steps" --epochs 1000 --device cuda --nproc 1
       --backend nccl --amp bf16 ${size#*:})
  declare -A ms=()
  for rep in 1 2; do
    for mode in norecord api gpu; do
      case $mode in norecord) extra=(--no-record) ;; api) extra=() ;; gpu) extra=(--cuda-trace gpu) ;; esac
      dir=$out/$name-$mode-$rep
      if timeout 120 "$exe" --record --out "$dir" "${job[@]}" "${extra[@]}" > "$dir.log" 2>&1; then
        ms[$mode]="${ms[$mode]:-} $(median "$dir")"
      else
        tail -5 "$dir.log"
      fi
    done
  done
  python3 - "$name" "${ms[norecord]:-}" "${ms[api]:-}" "${ms[gpu]:-}" <<'PY'
import statistics, sys
name, base, api, gpu = sys.argv[1], *[[float(x) for x in a.split()] for a in sys.argv[2:]]
b = statistics.median(base) if base else float("nan")
def row(label, v):
    m = statistics.median(v) if v else float("nan")
    print(f"{name:6} {label:22} step {m:8.3f} ms  ratio {m / b:6.3f}  (runs: {', '.join(f'{x:.3f}' for x in v)})")
row("--no-record", base)
row("--cuda-trace api", api)
row("--cuda-trace gpu", gpu)
PY
done
