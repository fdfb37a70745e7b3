"""The cost of `ddp_profile --record` on a data-heavy user script (docs/benchmarks.md "Recording a user's data
path"): tests/python/user_scripts/datapath_job.py (ImageFolder over PNG files, PIL decode, torchvision transforms,
DataLoader workers, 2 ranks on Gloo) run as it is, against the same under `ddp_profile --record`, where the companion
records every worker's fetch split into read / transform / collate, every step's stages and buckets, and
torch.profiler's window. The script measures its own mean step (after the first); rounds interleave the two; prints
each round and the ratio of the medians of all rounds. Target: within 1.05x.

    <venv>/bin/python bench/datapath_bench.py [--rounds 5] [--ddp-profile build/runtime/ddp_profile]
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
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--epochs", type=int, default=25)  # 400 steps: the profiler window and start-up amortised as in a real job
ap.add_argument("--image-size", type=int, default=96)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--ddp-profile", default=os.path.join(ROOT, "build", "runtime", "ddp_profile"))
args = ap.parse_args()
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
env = dict(os.environ, OMP_NUM_THREADS="1")
env.pop("DDP_PROFILE_RUN", None)
libs = ["/usr/local/cuda/lib64"] + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia",
                                                          "*", "lib"))
env["LD_LIBRARY_PATH"] = ":".join(libs + [os.environ.get("LD_LIBRARY_PATH", "")])
data = os.path.join(tempfile.gettempdir(), "ddp_profile_bench_images")
script = [torchrun, "--nproc-per-node", "2", os.path.join(ROOT, "tests", "python", "user_scripts", "datapath_job.py"),
          "--data", data, "--epochs", str(args.epochs), "--image-size", str(args.image_size), "--workers",
          str(args.workers), "--report"]


def mean_step(text: str) -> float:
    for line in reversed(text.splitlines()):
        if line.startswith("{") and "mean_step_ms" in line:
            return json.loads(line)["mean_step_ms"]
    raise RuntimeError("no result line in:\n" + text[-2000:])


def alone() -> float:
    return mean_step(subprocess.run(script, env=env, capture_output=True, text=True, check=True).stdout)


def recorded() -> float:
    out = tempfile.mkdtemp(prefix="datapath_bench_")
    r = subprocess.run([args.ddp_profile, "--record", "--out", out, "--"] + script, env=env, capture_output=True,
                       text=True, check=True)
    return mean_step(r.stderr + "\n" + r.stdout)  # the job's own output is echoed on stderr


alone()  # the images are made once, outside the rounds
times = {"alone": [], "record": []}
for r in range(args.rounds):
    a, c = alone(), recorded()
    times["alone"].append(a)
    times["record"].append(c)
    print("round %d: alone %.2f ms/step, --record %.2f ms/step (%.3fx)" % (r + 1, a, c, c / a), flush=True)
ma, mc = statistics.median(times["alone"]), statistics.median(times["record"])
print("median of %d rounds: alone %.2f ms/step, --record %.2f ms/step: %.3fx (target <= 1.05x)"
      % (args.rounds, ma, mc, mc / ma))
