#!/usr/bin/env bash
# Our run as Kineto traces, read by the real consumer: Holistic Trace Analysis (HTA, PyPI `holistictraceanalysis`).
# Records a short run (or takes RUN), exports it with `--export RUN --format kineto -o OUT`, and runs HTA's
# TraceAnalysis on OUT: the ranks it found, get_temporal_breakdown() and get_comm_comp_overlap(). Exits non-zero when
# HTA cannot read the files (or finds other ranks than the run has). HTA's breakdown and overlap count GPU kernels
# only: on a CPU run they have nothing to count, which the script says (docs/kineto.md records what HTA printed).
# A bench script, not a test: it needs PyPI once for the venv.
#
#   bash bench/hta_check.sh [RUN]
#
# Environment: DDP_CACHE (default ~/.cache/ddp_profile; the venv is DDP_CACHE/htavenv), DDP_HTA_VERSION (0.5.0),
# DDP_PROFILE (default build/runtime/ddp_profile).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${DDP_HTA_VERSION:-0.5.0}
cache=${DDP_CACHE:-$HOME/.cache/ddp_profile}
venv=$cache/htavenv
exe=${DDP_PROFILE:-build/runtime/ddp_profile}

if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('holistictraceanalysis') != '$version')" \
  2>/dev/null; then
  echo "creating $venv with holistictraceanalysis==$version" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "holistictraceanalysis==$version"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=${1:-}
if [ -z "$run" ]; then
  run=$work/run
  "$exe" --record --out "$run" --max-steps 30 > "$work/record.log" 2>&1 || { cat "$work/record.log"; exit 1; }
fi
out=$work/kineto
"$exe" --export "$run" --format kineto -o "$out"
world=$(ls "$out" | grep -c '\.pt\.trace\.json$')

"$venv/bin/python" - "$out" "$world" <<'EOF'
import sys
import warnings

import pandas as pd
from hta.trace_analysis import TraceAnalysis

trace_dir, world = sys.argv[1], int(sys.argv[2])
warnings.simplefilter("ignore")
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)

try:
    analysis = TraceAnalysis(trace_dir=trace_dir)
except Exception as e:  # HTA could not read our files: the export is wrong
    print(f"HTA failed to read {trace_dir}: {type(e).__name__}: {e}")
    sys.exit(1)
ranks = sorted(analysis.t.traces.keys())
print(f"HTA read ranks {ranks}")
if ranks != list(range(world)):
    print(f"HTA found ranks {ranks}, the run has {world}")
    sys.exit(1)
kernels = {r: int((df["stream"] >= 0).sum()) for r, df in analysis.t.traces.items()}
events = {r: len(df) for r, df in analysis.t.traces.items()}
print(f"events per rank {events}, GPU kernels and copies per rank {kernels}")

if not any(kernels.values()):
    print("CPU run: HTA's temporal breakdown and comm/compute overlap count GPU kernels only, and there are none")
for method in ("get_temporal_breakdown", "get_comm_comp_overlap"):
    try:
        print(f"{method}():")
        print(getattr(analysis, method)(visualize=False))
    except Exception as e:
        print(f"  failed: {type(e).__name__}: {e}")
        if any(kernels.values()):
            sys.exit(1)
EOF
