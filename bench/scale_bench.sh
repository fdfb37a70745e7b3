#!/usr/bin/env bash
# The figures of docs/benchmarks.md "At scale" (issue 34): for each folder of per-rank PyTorch profiler traces (made
# by bench/replicate_ranks.py), in one run: --analyze's time and peak RSS; the same traces digested (--digest, as
# each node would) and --analyze of the digests; the viewer's load (timeline, then its stalls panel), its peak RSS and
# its frame time (p90 over --frames static frames with every rank collapsed) under xvfb-run. Prints the ratios the
# issue sets: viewer load <= 2x --analyze, frame p90 <= 16 ms, digests analysed in < 1 s; and at 1024 ranks (issue
# 51) --analyze in <= 5 s and <= 150 MB of peak RSS, each as measured/target.
#
#   bash bench/scale_bench.sh /tmp/scale/r64 /tmp/scale/r256 /tmp/scale/r1024
#   DDP_BUILD=build-lite bash bench/scale_bench.sh ...   (another build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DDP_BUILD:-build}
exe=$build/runtime/ddp_profile viewer=$build/viewer/ddp_viewer
analyze_s_target=5 analyze_mb_target=150  # at 1024 ranks
targets=""
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
timed() {  # timed LOG CMD...: runs CMD, its output in LOG; prints "<seconds> <peak RSS MB>"
  local log=$1; shift
  /usr/bin/time -f "%e %M" -o "$out/time" "$@" > "$log" 2>&1
  awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$out/time"
}
printf "%-28s %6s %9s %9s %9s %9s %9s %9s %9s %8s %9s\n" traces ranks analyze_s analyze_MB digest_s dig_an_s \
  view_load_s view_ana_s view_MB frame_p90 load/ana
for dir in "$@"; do
  ranks=$(ls "$dir" | grep -c '\.json')
  read -r a_s a_mb < <(timed "$out/analyze.log" "$exe" --analyze "$dir")
  rm -rf "$out/digests"
  read -r d_s _ < <(timed "$out/digest.log" "$exe" --digest "$dir" -o "$out/digests")
  read -r da_s _ < <(timed "$out/dig_analyze.log" "$exe" --analyze "$out/digests")
  # The verdict from the digests is the verdict from the traces.
  if ! diff <(head -1 "$out/analyze.log") <(head -1 "$out/dig_analyze.log") > /dev/null; then
    echo "digests and traces disagree on $dir:"; head -1 "$out/analyze.log" "$out/dig_analyze.log"; exit 1
  fi
  read -r _ v_mb < <(timed "$out/viewer.log" xvfb-run -a "$viewer" "$dir" --screenshot "$out/shot.png" --frames 60)
  load_ms=$(grep -o 'in [0-9.]* ms' "$out/viewer.log" | head -1 | tr -dc '0-9.')
  ana_ms=$(grep -o 'analysed in [0-9.]* ms' "$out/viewer.log" | tr -dc '0-9.')
  p90=$(grep -o 'p90=[0-9.]*' "$out/viewer.log" | cut -d= -f2)
  awk -v d="$dir" -v r="$ranks" -v as="$a_s" -v am="$a_mb" -v ds="$d_s" -v das="$da_s" -v l="$load_ms" \
      -v an="${ana_ms:-$load_ms}" -v vm="$v_mb" -v p="$p90" 'BEGIN {
    printf "%-28s %6d %9.2f %9d %9.2f %9.2f %9.2f %9.2f %9d %8.2f %8.2fx\n", d, r, as, am, ds, das, l / 1000, an / 1000,
      vm, p, (l / 1000) / as }'
  if [ "$ranks" -eq 1024 ]; then
    targets+=$(awk -v d="$dir" -v as="$a_s" -v am="$a_mb" -v ts="$analyze_s_target" -v tm="$analyze_mb_target" 'BEGIN {
      printf "--analyze of 1024 ranks (%s): %.2f s / %d s = %.2f, peak RSS %d MB / %d MB = %.2f (measured/target, <= 1: met)\n",
        d, as, ts, as / ts, am, tm, am / tm }')$'\n'
  fi
done
echo "targets: viewer load <= 2x --analyze (load/ana), frame p90 <= 16 ms, --analyze of 1024 digests < 1 s (dig_an_s)"
printf "%s" "$targets"
