#!/usr/bin/env bash
# The GPU tier on a machine with an NVIDIA GPU, in one go (< 5 minutes on the reference: one H200, PyTorch 2.11 cu130,
# CMake, ninja, nvcc, no network). Builds the CUDA tier against the Python package's LibTorch (or uses DDP_BUILD, a
# build folder copied there), measures the machine's copy peaks, records short jobs and prints one table:
#
#   run                        ranks backend amp  staging  step ms  H2D GB/s (CUPTI)  kernels/step  CUPTI linked  ok
#   nccl1-fp16 / nccl1-bf16    1     nccl    ...  pinned
#   nccl1-fp16-pageable        1     nccl    fp16 pageable
#   gloo2-fp16 / gloo2-bf16    2     gloo    ...  pinned   (one GPU: two ranks share it through Gloo with CUDA tensors)
#   norecord                   1     nccl    fp16 pinned   (the recording-overhead baseline)
#
# then: H2D pinned/pageable vs the peaks gpu_peaks measured, recording overhead (step time recorded / --no-record),
# a few closed-loop checks, and PASS/FAIL lines. Exit code 0 only when every check passed.
#
# The reference GPU machine has no libgloo-dev, libzstd-dev, nlohmann-json or CLI11 headers, so it cannot build this
# project: build the CUDA tier here, pack it with bench/device_bundle.sh into .device/ and carry that folder. The
# bundle's binaries load the machine's own PyTorch libraries (found through python3, or DDP_TORCH_LIB).
#
#   bash bench/device_check.sh                      # use .device/ if present, else build into build-device/
#   DDP_BUILD=build-cuda bash bench/device_check.sh # use an existing CUDA build tree
#   STEPS=100 bash bench/device_check.sh            # longer runs (default 60 optimizer steps each)
#
# Where $OUT is set (the device tool), the table and a small archive of logs, manifests and checks land there.
set -uo pipefail
cd "$(dirname "$0")/.."
t_start=$(date +%s)
steps=${STEPS:-60}
# DDP_CHECK_BUDGET_S: the whole check ends within this many seconds (a device lease is short): each step's time limit
# is cut to what is left, and what was measured comes back all the same.
deadline=$(( t_start + ${DDP_CHECK_BUDGET_S:-100000} ))
cap() { local left=$(( deadline - $(date +%s) - 15 )); [ "$left" -lt 5 ] && left=5; echo $(( left < $1 ? left : $1 )); }
if [ -n "${DDP_BUILD:-}" ]; then build=$DDP_BUILD; elif [ -x .device/ddp_profile ]; then build=.device; else build=build-device; fi
out=${DDP_CHECK_OUT:-$(mktemp -d /tmp/ddp_device_check.XXXXXX)}
mkdir -p "$out"
jobs=${JOBS:-$(nproc)}
fails=0
# What comes back from the device tool ($OUT): the table, the logs, and the real GPU traces; also when a step ran out
# of time or failed (an EXIT trap).
copy_out() {
  [ -n "${OUT:-}" ] && [ -d "$OUT" ] || return 0
  cp "$out/table.txt" "$OUT/device_table.txt" 2>/dev/null
  (cd "$out" && find . -maxdepth 3 \( -name '*.log' -o -name '*.txt' -o -name 'manifest.json' -o -name 'checks.json' \
     -o -name 'run_status.json' -o -name 'analysis.json' \) -print0 | tar czf "$OUT/device_check_logs.tgz" --null -T -)
  # The Python job's per-rank Kineto traces, and two of our recorded runs (for the viewer).
  (cd "$out" && tar czf "$OUT/device_kineto_traces.tgz" kineto-gloo2 kineto-nccl1 2>/dev/null)
  (cd "$out" && tar czf "$OUT/device_runs.tgz" nccl1-fp16/trace.json nccl1-fp16/manifest.json gloo2-fp16/trace.json \
     gloo2-fp16/manifest.json 2>/dev/null)
  (cd "$out" && tar czf "$OUT/device_py_runs.tgz" --exclude='*.pt' py-record py-check/checks.json 2>/dev/null)
  return 0
}
trap copy_out EXIT
say() { echo "device_check: $*"; }
fail() { say "FAIL: $*"; fails=$((fails + 1)); }
# A bundle keeps its files flat; a build tree keeps them under runtime/ and tests/.
find_bin() { if [ -x "$build/$1" ]; then echo "$build/$1"; else echo "$build/$2/$1"; fi; }

command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 - <<'PY' || true
import torch
print(f"torch {torch.__version__} cuda {torch.version.cuda} devices {torch.cuda.device_count()}")
PY
[ -f "$build/BUILD_INFO" ] && sed 's/^/bundle: /' "$build/BUILD_INFO"

# The PyTorch package's libraries (its own RPATHs find the nvidia-* packages beside it) and the CUDA libraries our
# binaries load directly (cudart, CUPTI): the package's copies first, so one CUPTI serves us and Kineto alike.
torch_lib=${DDP_TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)}
if [ -n "$torch_lib" ]; then
  libs=$torch_lib
  for d in "$torch_lib"/../../nvidia/*/lib /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib; do
    [ -d "$d" ] && libs=$libs:$(cd "$d" && pwd)
  done
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# A bundle carries the system libraries the GPU machine lacks (device_bundle.sh).
[ -d "$build/lib" ] && export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- build (only without a bundle or build tree) ------------------------------------------------------------------
exe=$(find_bin ddp_profile runtime)
if [ ! -x "$exe" ]; then
  torch_dir=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch
  cuda_root=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
  say "no bundle (.device/, see bench/device_bundle.sh): building the CUDA tier in $build (Torch_DIR=$torch_dir)"
  cmake -S . -B "$build" -G Ninja -DTorch_DIR="$torch_dir" -DDDP_PROFILE_CUDA=ON -DDDP_PROFILE_VIEWER=OFF \
    -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda_root" > "$out/cmake.log" 2>&1 \
    || { tail -30 "$out/cmake.log"; fail "cmake"; exit 1; }
  ninja -C "$build" -j"$jobs" ddp_profile profiler_tests runtime_tests > "$out/build.log" 2>&1 \
    || { grep -m20 -E "error|Error" "$out/build.log"; fail "build"; exit 1; }
  exe=$(find_bin ddp_profile runtime)
fi
peaks_exe=$build/gpu_peaks
if [ ! -x "$peaks_exe" ]; then
  peaks_exe=$out/gpu_peaks
  nvcc -O2 -o "$peaks_exe" bench/gpu_peaks.cu > "$out/nvcc.log" 2>&1 || { cat "$out/nvcc.log"; fail "nvcc gpu_peaks"; }
fi
# A library the binary cannot find is the one failure that would otherwise look like every run failing.
if ldd "$exe" | grep -q "not found"; then
  ldd "$exe" | grep "not found"
  fail "$exe cannot load its libraries (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  exit 1
fi
say "binaries ready after $(( $(date +%s) - t_start )) s"

# ---- unit tests (the CUPTI source must start for real here; the CUDA path's tests take the GPU branch) -------------
for t in profiler_tests runtime_tests; do
  bin=$(find_bin $t tests)
  [ -x "$bin" ] || { say "$t: not in $build, skipped"; continue; }
  # The companion contract test reads python/ from the source tree it was built in, which a bundle does not carry.
  timeout "$(cap 120)" "$bin" --gtest_brief=1 --gtest_filter=-CompanionContract.* > "$out/$t.log" 2>&1 \
    && say "$t passed" || { tail -20 "$out/$t.log"; fail "$t"; }
done

# ---- peaks -----------------------------------------------------------------------------------------------------------
if [ -x "$peaks_exe" ]; then
  timeout "$(cap 60)" "$peaks_exe" 256 10 > "$out/peaks.txt" 2>&1 || fail "gpu_peaks"
  cat "$out/peaks.txt"
fi

# ---- recordings --------------------------------------------------------------------------------------------------
job=(--dataset-size 65536 --features 1024 --hidden 2048 --batch-size 512 --workers 4 --prefetch 4 --max-steps "$steps"
     --epochs 1000 --device cuda)
run() {  # name, then options
  local name=$1; shift
  local t0=$(date +%s)
  timeout "$(cap 120)" "$exe" --record --out "$out/$name" "${job[@]}" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    say "$name: ok ($(( $(date +%s) - t0 )) s)"
  else
    tail -15 "$out/$name.log"
    fail "$name (exit $rc)"
  fi
}
run nccl1-fp16 --nproc 1 --backend nccl --amp fp16
run norecord --nproc 1 --backend nccl --amp fp16 --no-record
run nccl1-fp16-gpu --nproc 1 --backend nccl --amp fp16 --cuda-trace gpu  # CUPTI without API records
run nccl1-fp16-off --nproc 1 --backend nccl --amp fp16 --cuda-trace off  # spans and NVTX only
run nccl1-bf16 --nproc 1 --backend nccl --amp bf16
run nccl1-fp16-pageable --nproc 1 --backend nccl --amp fp16 --pageable
run gloo2-fp16 --nproc 2 --backend auto --amp fp16
run gloo2-bf16 --nproc 2 --backend auto --amp bf16

# ---- closed-loop checks on the GPU (the quick ones) -------------------------------------------------------------
t0=$(date +%s)
if timeout "$(cap 120)" "$exe" --check --out "$out/check" "${job[@]}" --max-steps 20 --nproc 2 --amp off \
    --checks env.manifest,data.shard_rule,numerics.rank_sync,comm.no_sync > "$out/check.log" 2>&1; then
  say "checks: ok ($(( $(date +%s) - t0 )) s)"
else
  tail -15 "$out/check.log"
  fail "checks"
fi

# ---- the Python side on the GPU: real GPU Kineto traces of our test job, the companion's ladder and recording ---------
# PyTorch's own profiler with CUDA activity around tests/python/kineto_job.py (two ranks sharing the GPU through Gloo
# with CUDA tensors, and one rank on NCCL): real GPU Kineto traces (kernels, memcpys, NCCL kernels) that --analyze,
# the clock alignment and the viewer are then tested on (tests/data/kineto/pytorch-2.11-gpu/). Then the companion on
# examples/seed_job.py (NCCL, AMP fp16 with GradScaler): the whole --check ladder and --record.
py_torchrun() { python3 -m torch.distributed.run --master-port "$(( 29600 + RANDOM % 2000 ))" "$@"; }
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
for k in gloo2:2 nccl1:1; do
  name=kineto-${k%%:*}; n=${k##*:}
  t0=$(date +%s)
  if timeout "$(cap 120)" bash -c "$(declare -f py_torchrun); py_torchrun --nproc-per-node $n tests/python/kineto_job.py \
      --device cuda --out '$out/$name' --steps 20 --workers 2 --record-shapes" > "$out/$name.log" 2>&1; then
    say "$name: ok ($(( $(date +%s) - t0 )) s, $(ls "$out/$name" | wc -l) trace file(s))"
    timeout "$(cap 60)" "$exe" --analyze "$out/$name" > "$out/$name.analyze.txt" 2>&1 || fail "--analyze $name"
    head -12 "$out/$name.analyze.txt"
  else
    tail -15 "$out/$name.log"
    fail "$name (python kineto job)"
  fi
done
seed=(examples/seed_job.py --epochs 2 --amp fp16 --ckpt "$out/py-ckpt.pt")
t0=$(date +%s)
if timeout "$(cap 300)" "$exe" --check --out "$out/py-check" --resume-arg '--resume {ckpt}' -- \
    python3 -m torch.distributed.run --nproc-per-node 1 --master-port 29811 "${seed[@]}" > "$out/py-check.log" 2>&1; then
  say "companion --check of seed_job.py (NCCL, fp16 + GradScaler): ok ($(( $(date +%s) - t0 )) s)"
else
  fail "companion --check of seed_job.py (NCCL, fp16 + GradScaler) ($(( $(date +%s) - t0 )) s)"
fi
grep -E '^(env|data|numerics|comm|checkpoint|faults)\.' "$out/py-check.log" | cut -c1-240
t0=$(date +%s)
if timeout "$(cap 180)" "$exe" --record --out "$out/py-record" -- \
    python3 -m torch.distributed.run --nproc-per-node 1 --master-port 29812 "${seed[@]}" > "$out/py-record.log" 2>&1; then
  say "companion --record of seed_job.py: ok ($(( $(date +%s) - t0 )) s)"
  tail -8 "$out/py-record.log"
else
  tail -15 "$out/py-record.log"
  fail "companion --record of seed_job.py"
fi

# ---- table ---------------------------------------------------------------------------------------------------------
python3 - "$out" <<'PY' | tee "$out/table.txt"
import json, os, statistics, sys
out = sys.argv[1]
peaks = {}
if os.path.exists(f"{out}/peaks.txt"):
    for line in open(f"{out}/peaks.txt"):
        k, _, v = line.strip().partition(" ")
        try: peaks[k] = float(v)
        except ValueError: pass

def load(name):
    d = f"{out}/{name}"
    m = json.load(open(f"{d}/manifest.json")) if os.path.exists(f"{d}/manifest.json") else {}
    t = json.load(open(f"{d}/trace.json")) if os.path.exists(f"{d}/trace.json") else {"traceEvents": []}
    return m, t["traceEvents"]

def stats(events):
    s = {"kernels": 0, "gpu": 0, "flows": 0, "pinned_b": 0, "pinned_us": 0.0, "pageable_b": 0, "pageable_us": 0.0,
         "nccl": 0, "api": 0, "steps": set()}
    for e in events:
        ph, cat = e.get("ph"), e.get("cat", "")
        if ph == "f": s["flows"] += 1
        if ph != "X": continue
        a = e.get("args", {})
        if e.get("name") == "step": s["steps"].add((e.get("pid"), a.get("step")))
        if cat == "kernel":
            s["kernels"] += 1
            s["nccl"] += a.get("stage") == "nccl"
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"): s["gpu"] += 1
        if cat == "cuda_runtime": s["api"] += 1
        if cat == "gpu_memcpy" and "HtoD" in e.get("name", ""):
            kind = "pinned" if "pinned->" in e["name"] else "pageable" if "pageable->" in e["name"] else None
            if kind:
                s[kind + "_b"] += a.get("bytes", 0)
                s[kind + "_us"] += e.get("dur", 0.0)
    return s

def step_ms(m):
    r = m.get("ranks", [])
    return statistics.median(x["step_time_median_ms"] for x in r) if r else float("nan")

def gbps(b, us): return b / (us * 1e-6) / 1e9 if us > 0 else float("nan")

rows = [("nccl1-fp16", 1, "fp16", "pinned"), ("nccl1-bf16", 1, "bf16", "pinned"),
        ("nccl1-fp16-pageable", 1, "fp16", "pageable"), ("gloo2-fp16", 2, "fp16", "pinned"),
        ("gloo2-bf16", 2, "bf16", "pinned"), ("nccl1-fp16-gpu", 1, "fp16", "pinned"),
        ("nccl1-fp16-off", 1, "fp16", "pinned"), ("norecord", 1, "fp16", "pinned")]
print()
print(f"{'run':22} {'ranks':>5} {'backend':>7} {'amp':>4} {'staging':>8} {'step ms':>8} {'H2D GB/s':>9} "
      f"{'kern/step':>9} {'nccl':>5} {'linked':>7} {'api':>6}")
res = {}
for name, ranks, amp, staging in rows:
    m, ev = load(name)
    s = stats(ev)
    res[name] = (m, s)
    nsteps = max(1, len(s["steps"]))
    h2d = gbps(s[staging + "_b"], s[staging + "_us"])
    linked = s["flows"] / s["gpu"] if s["gpu"] else float("nan")
    print(f"{name:22} {ranks:5d} {m.get('backend', '?'):>7} {amp:>4} {staging:>8} {step_ms(m):8.3f} {h2d:9.2f} "
          f"{s['kernels'] / nsteps:9.1f} {s['nccl']:5d} {linked:7.1%} {s['api']:6d}")
print()
p, pg = res["nccl1-fp16"][1], res["nccl1-fp16-pageable"][1]
print(f"H2D pinned   (CUPTI, training copies): {gbps(p['pinned_b'], p['pinned_us']):7.2f} GB/s  "
      f"peak {peaks.get('h2d_pinned', float('nan')):7.2f} GB/s")
print(f"H2D pageable (CUPTI, training copies): {gbps(pg['pageable_b'], pg['pageable_us']):7.2f} GB/s  "
      f"peak {peaks.get('h2d_pageable', float('nan')):7.2f} GB/s")
print(f"D2D peak {peaks.get('d2d', float('nan')):.2f} GB/s, D2H pinned peak {peaks.get('d2h_pinned', float('nan')):.2f} GB/s")
rec, base = step_ms(res["nccl1-fp16"][0]), step_ms(res["norecord"][0])
print(f"recording overhead (NVTX + CUPTI + spans): step {rec:.3f} ms vs {base:.3f} ms --no-record = ratio {rec / base:.3f}")
for name, what in (("nccl1-fp16-gpu", "--cuda-trace gpu (GPU work, no API records)"),
                   ("nccl1-fp16-off", "--cuda-trace off (spans and NVTX only)")):
    print(f"  {what}: step {step_ms(res[name][0]):.3f} ms = ratio {step_ms(res[name][0]) / base:.3f}")
ok = True
def check(cond, what):
    global ok
    print(("PASS " if cond else "FAIL ") + what)
    ok = ok and cond
check(p["kernels"] > 0, "CUPTI recorded kernels in the NCCL run")
check(p["gpu"] > 0 and p["flows"] / p["gpu"] >= 0.9, "at least 90% of GPU records linked to their launching API call")
check(p["pinned_b"] > 0, "pinned H2D copies recorded with their memory kind")
check(pg["pageable_b"] > 0, "pageable H2D copies recorded with their memory kind (--pageable)")
check(res["gloo2-fp16"][1]["kernels"] > 0 and res["gloo2-fp16"][0].get("backend") == "gloo",
      "two ranks on one GPU ran through Gloo with CUDA tensors")
check(rec / base <= 1.10, "recording overhead ratio <= 1.10")
gpu_only = step_ms(res["nccl1-fp16-gpu"][0])
check(gpu_only / base <= 1.10, "recording overhead ratio <= 1.10 with --cuda-trace gpu")
if os.path.exists(f"{out}/check/checks.json"):
    c = json.load(open(f"{out}/check/checks.json"))
    items = c.get("checks", c) if isinstance(c, dict) else c
    for it in items if isinstance(items, list) else []:
        if it.get("status") != "skip":
            check(it.get("status") in ("pass", "warn"), f"check {it.get('id', '?')}: {it.get('summary', '')}")
sys.exit(0 if ok else 1)
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
say "done in $(( $(date +%s) - t_start )) s; outputs in $out"
[ "$fails" -eq 0 ] && say "ALL PASSED" || say "$fails problem(s)"
exit $((fails > 0))
