"""Check mode's cost on a ~100 MB model (docs/benchmarks.md): the script's own steady step (bench/check_mode_step.py,
the steps after warm-up and the verified ones) with the companion attached but no ddp_profile around it, against the
same under `ddp_profile --check` (its main run: replica digest every step, gradient norms, forward checks, memory,
samples). Rounds interleave the two; prints each round's medians and the ratio of the medians of all rounds.
Target: check mode within 1.10x.
--unmodified: the script with no ddp_profile line, run as it is against the same under `ddp_profile --check`, where
ddp_profile.auto attaches by itself (what an unmodified script costs in check mode).

    <venv>/bin/python bench/check_mode_bench.py [--rounds 3] [--unmodified] [--ddp-profile build/runtime/ddp_profile]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--unmodified", action="store_true")
ap.add_argument("--ddp-profile", default=os.path.join(ROOT, "build", "runtime", "ddp_profile"))
args = ap.parse_args()
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1")
env.pop("DDP_PROFILE_RUN", None)
libs = ["/usr/local/cuda/lib64"] + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "lib"))
env["LD_LIBRARY_PATH"] = ":".join(libs + [os.environ.get("LD_LIBRARY_PATH", "")])
script = [torchrun, "--nproc-per-node", "2", os.path.join(ROOT, "bench", "check_mode_step.py"), "--steps",
          str(args.steps)] + (["--unmodified"] if args.unmodified else [])


def last_json(text: str) -> dict:
    for line in reversed(text.splitlines()):
        if line.startswith("{") and "median_ms" in line:
            return json.loads(line)
    raise RuntimeError("no result line in:\n" + text[-2000:])


def plain() -> dict:
    return last_json(subprocess.run(script, env=env, capture_output=True, text=True, check=True).stdout)


def checked() -> dict:
    out = tempfile.mkdtemp(prefix="check_mode_bench_")
    subprocess.run([args.ddp_profile, "--check", "--out", out, "--checks", "numerics.rank_sync", "--"] + script,
                   env=env, capture_output=True, text=True, check=True)
    with open(os.path.join(out, "main", "logs", "launch.log"), encoding="utf-8") as f:
        return last_json(f.read())


baseline = "as it is" if args.unmodified else "attached"
medians = {"attached": [], "check": []}
means = {"attached": [], "check": []}  # a census of the live tensors lands on some steps: the mean carries its cost
for r in range(args.rounds):
    a, c = plain(), checked()
    for k, v in (("attached", a), ("check", c)):
        medians[k].append(v["median_ms"])
        means[k].append(v["mean_ms"])
    print("round %d: %s %.1f ms, check %.1f ms; means %.1f, %.1f ms (%d parameters, %d steady steps)"
          % (r + 1, baseline, a["median_ms"], c["median_ms"], a["mean_ms"], c["mean_ms"], a["parameters"],
             a["steps"]), flush=True)
ratio = statistics.median(medians["check"]) / statistics.median(medians["attached"])
print("check mode / %s, median step: %.3f (target <= 1.10)" % (baseline, ratio))
print("check mode / %s, mean step: %.3f" % (baseline, statistics.median(means["check"]) /
                                            statistics.median(means["attached"])))
