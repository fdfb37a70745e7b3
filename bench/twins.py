"""The replay's predictions against real twins (issue 51, docs/stalls.md "Twins"): each case records a planted run
and the twin that differs by what an edit changes, three times each, interleaved (planted, twin, planted, ...); the
planted run's `--what-if EDIT --json` is the prediction; printed per case: the median predicted step against the
median measured twin step, and the miss, with the bar the issue sets (15 % for a removed straggler stage, 20 % for
the rest). Misses are printed as misses: the bench reports, it does not retry.

Cases, on this machine's 2 cores:
- our job (its --slow knobs sleep: no core taken): forward, backward, optimizer and a loader's transform removed
  from a straggler; workers=3 on a loader-bound run; prefetch=6; bucket_cap_mb=4 from 1; accum=4.
- a user's unmodified script under `--record -- torchrun` (tests/python/user_scripts/datapath_job.py, needs the
  torch venv with torchvision): a spinning transform removed from rank 1 (CPU-bound: the cores the twin frees);
  workers=4 from one worker on slow storage (I/O-bound); workers=2 from num_workers=0 (loading on the training
  thread); prefetch=7 for a bursty reader.

    <venv>/bin/python bench/twins.py [--rounds 3] [--only ours|user] [--ddp-profile build/runtime/ddp_profile]
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
ap.add_argument("--only", choices=["ours", "user"], default=None)
ap.add_argument("--ddp-profile", default=os.path.join(ROOT, "build", "runtime", "ddp_profile"))
args = ap.parse_args()
exe = args.ddp_profile
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
env = dict(os.environ)
env.pop("DDP_PROFILE_RUN", None)
env["PYTHONPATH"] = os.path.join(ROOT, "python")
libs = ["/usr/local/cuda/lib64"] + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia",
                                                          "*", "lib"))
env["LD_LIBRARY_PATH"] = ":".join(libs + [os.environ.get("LD_LIBRARY_PATH", "")])
images = os.path.join(tempfile.gettempdir(), "ddp_profile_twins_images")
port = [29700]


def printed_json(text: str) -> dict:
    return json.loads(text[text.index("{"):])


def ours(*opts: str) -> list:
    # A model whose step is ~8 ms here (the default's ~1.2 ms is the size of what a 20 ms sleep leaves behind: clocks
    # and caches cold after it, ~1 ms a step the replay is not told of).
    return ["--max-steps", "40", "--hidden", "2048", "--features", "512"] + list(opts)


def user(*opts: str) -> list:
    port[0] += 1
    return ["--", torchrun, "--nproc-per-node", "2", "--master-port", str(port[0]),
            os.path.join(ROOT, "tests", "python", "user_scripts", "datapath_job.py"), "--data", images] + list(opts)


def record(run_args: list) -> str:
    out = tempfile.mkdtemp(prefix="twins_")
    subprocess.run([exe, "--record", "--out", out] + run_args, env=env, capture_output=True, text=True, check=True)
    return out


def measured(run: str) -> float:
    r = subprocess.run([exe, "--analyze", run, "--json"], env=env, capture_output=True, text=True, check=True)
    return printed_json(r.stdout)["step_ms"]


def predicted(run: str, edit: str) -> float:
    r = subprocess.run([exe, "--what-if", edit, run, "--json"], env=env, capture_output=True, text=True, check=True)
    return printed_json(r.stdout)["step_ms"]


# (name, bar, edit, planted run, twin run); the user's cases need the torch venv.
OURS = [
    ("straggler forward (sleep)", 0.15, "rank1.forward=median", ours("--slow", "rank=1,stage=forward,ms=20"), ours()),
    ("straggler backward (sleep)", 0.15, "rank0.backward=median", ours("--slow", "rank=0,stage=backward,ms=20"),
     ours()),
    ("straggler optimizer (sleep)", 0.15, "rank1.optimizer=median", ours("--slow", "rank=1,stage=optimizer,ms=20"),
     ours()),
    ("straggler transform (sleep)", 0.15, "rank0.transform=median", ours("--slow", "rank=0,stage=transform,ms=60"),
     ours()),
    ("workers=3 (loader-bound)", 0.20, "workers=3", ours("--workers", "1", "--slow", "rank=0,stage=disk_read,ms=15",
                                                         "--slow", "rank=1,stage=disk_read,ms=15"),
     ours("--workers", "3", "--slow", "rank=0,stage=disk_read,ms=15", "--slow", "rank=1,stage=disk_read,ms=15")),
    ("prefetch=6", 0.20, "prefetch=6", ours("--prefetch", "1"), ours("--prefetch", "6")),
    ("bucket_cap_mb=4", 0.20, "bucket_cap_mb=4", ours("--bucket-mb", "1"), ours("--bucket-mb", "4")),
    ("accum=4", 0.20, "accum=4", ours(), ours("--accum-steps", "4")),
]
USER = [
    ("user: straggler transform (spinning)", 0.15, "rank1.transform=median", user("--slow-transform", "1:3"), user()),
    ("user: workers=4 (slow storage)", 0.20, "workers=4", user("--workers", "1", "--slow-read", "0:8"),
     user("--workers", "4", "--slow-read", "0:8")),
    ("user: workers=2 from num_workers=0", 0.20, "workers=2", user("--workers", "0"), user("--workers", "2")),
    ("user: prefetch=7 (bursty reads)", 0.20, "prefetch=7",
     user("--burst", "1:96:300", "--width", "64", "--images", "512"),
     user("--burst", "1:96:300", "--width", "64", "--images", "512", "--prefetch", "7")),
]
cases = (OURS if args.only != "user" else []) + (USER if args.only != "ours" else [])
rows = []
for name, bar, edit, planted_args, twin_args in cases:
    preds, twins = [], []
    for _ in range(args.rounds):
        preds.append(predicted(record(planted_args), edit))
        twins.append(measured(record(twin_args)))
    p, t = statistics.median(preds), statistics.median(twins)
    miss = (p - t) / t
    rows.append((name, edit, p, t, miss, bar))
    print("%-40s %-24s predicted %7.2f ms, twin %7.2f ms: %+6.1f %% (bar %d %%)%s"
          % (name, edit, p, t, 100 * miss, 100 * bar, "" if abs(miss) <= bar else "  MISS"), flush=True)
held = sum(1 for r in rows if abs(r[4]) <= r[5])
print("%d of %d cases within their bar (medians of %d rounds each)" % (held, len(rows), args.rounds))
