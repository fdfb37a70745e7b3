#!/usr/bin/env bash
# Recording overhead: the default job recorded vs the identical job with --no-record, run alternately, compared by
# the ratio of median step times (each run's median over both ranks, then the median over runs). Target <= 1.01.
# Usage: bench/overhead.sh [PAIRS] [extra job options...]
set -euo pipefail
cd "$(dirname "$0")/.."
exe=build/runtime/ddp_profile
pairs=${1:-5}
shift || true
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 "$pairs"); do
  for mode in record norecord; do
    flag=""; [ "$mode" = norecord ] && flag="--no-record"
    "$exe" --record --out "$out/$mode-$i" $flag "$@" > "$out/$mode-$i.log" 2>&1 || { cat "$out/$mode-$i.log"; exit 1; }
  done
done
python3 - "$out" "$pairs" <<'PY'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def median_step(d):
    m = json.load(open(f"{out}/{d}/manifest.json"))
    return statistics.median(r["step_time_median_ms"] for r in m["ranks"])
rec = [median_step(f"record-{i}") for i in range(1, pairs + 1)]
base = [median_step(f"norecord-{i}") for i in range(1, pairs + 1)]
ratio = statistics.median(rec) / statistics.median(base)
print("record_step_ms", [round(x, 4) for x in rec])
print("norecord_step_ms", [round(x, 4) for x in base])
print(f"overhead_ratio={ratio:.4f} target=1.01 {'met' if ratio <= 1.01 else 'NOT met'}")
PY
