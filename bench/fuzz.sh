#!/usr/bin/env bash
# Fuzzes every reader of outside bytes for N seconds each (default 60) under ASan + UBSan, with libFuzzer (clang):
# the Chrome/Kineto JSON reader (plain and gzip) and the viewer's timeline from it, its cutting of big documents into pieces, the Kineto importer, the native .ddpt reader, the manifest reader,
# the .ddpd dataset reader and the checkpoint integrity check. Seeds: tests/data (real traces) and tests/data/fuzz.
# Seeds are the inputs under 1 MB (the hang criterion: > 1 s on a < 1 MB input). A crash, leak or slow input stops that target and leaves its input in build-fuzz/findings/<target>/; keep
# it as a regression input in tests/data/fuzz/regressions/. Prints executions per target.
#
#   bash bench/fuzz.sh [SECONDS]          (FUZZ_TARGETS="..." for some of them, FUZZ_TIMEOUT=S for the hang limit)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
build=${DDP_FUZZ_BUILD:-build-fuzz}
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ is needed (apt-get install clang)"; exit 2; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DDDP_PROFILE_FUZZ=ON -DDDP_PROFILE_RUNTIME=OFF -DDDP_PROFILE_VIEWER=OFF -DDDP_PROFILE_BENCH=OFF \
  -DDDP_PROFILE_TESTS=OFF > /dev/null
# FUZZ_TARGETS="fuzz_dataset fuzz_checkpoint" runs only those.
targets=(${FUZZ_TARGETS:-fuzz_chrome_json fuzz_chrome_pieces fuzz_kineto_file fuzz_native_trace fuzz_manifest fuzz_fr_dump fuzz_kineto_digest fuzz_safetensors fuzz_dataset fuzz_checkpoint})
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}"

seed() {  # target -> seed files
  case $1 in
    fuzz_chrome_json|fuzz_kineto_file) find tests/data/kineto -type f \( -name '*.json' -o -name '*.json.gz' \) -size -1024k ;;
    fuzz_chrome_pieces) find tests/data/fuzz/pieces -type f ;;
    fuzz_native_trace) find tests/data/fuzz/native -type f ;;
    fuzz_manifest) find tests/data/fuzz/manifest -type f ;;
    fuzz_fr_dump) find tests/data/flight_recorder -type f \( -name '*.pkl' -o -name '*.json' \) -size -64k ;;
    fuzz_kineto_digest) find tests/data/fuzz/digest -type f ;;
    fuzz_dataset) find tests/data/fuzz/dataset -type f ;;
    fuzz_safetensors) find tests/data/safetensors -type f -name '*.safetensors' ;;
    fuzz_checkpoint) true ;;
  esac
  if [ -d "tests/data/fuzz/regressions/$1" ]; then find "tests/data/fuzz/regressions/$1" -type f; fi
  return 0
}

status=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t findings=$build/findings/$t
  mkdir -p "$corpus" "$findings"
  seed "$t" | while read -r f; do cp "$f" "$corpus/"; done
  log=$build/$t.log
  rc=0
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/tests/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -timeout="${FUZZ_TIMEOUT:-1}" -rss_limit_mb=2048 -max_len=1048576 \
    -artifact_prefix="$findings/" "$corpus" > "$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1 || true)
  [ -z "$execs" ] && execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
  if [ "$rc" = 0 ]; then
    echo "$t: ${execs:-?} executions in ${secs} s, no crash, leak or hang"
  else
    echo "$t: FOUND something (exit $rc) after ${execs:-?} executions: $(ls "$findings" | head -3) — see $log"
    status=1
  fi
done
exit $status
