"""The companion's cost on the seed's job in Python (issue: "Cost"), measured in one run, variants interleaved:

- attached, no ddp_profile around it   vs the plain script          target: mean step within 1 %
- the companion's record mode          vs torch.profiler, same schedule  target: within 2 %
- the companion's check mode: a verified step's extra cost (the first 3 steps) and the other steps'
- `ddp_profile --check` of the seed job, the whole ladder             target: < 90 s on 2 cores

    <venv>/bin/python bench/companion_bench.py [--rounds 3] [--ddp-profile build/runtime/ddp_profile]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--ddp-profile", default=os.path.join(ROOT, "build", "runtime", "ddp_profile"))
args = ap.parse_args()
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1")
libs = ["/usr/local/cuda/lib64"] + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "lib"))
env["LD_LIBRARY_PATH"] = ":".join(libs + [os.environ.get("LD_LIBRARY_PATH", "")])


def run(variant: str, mode: str = "", epochs: int = 2, full: bool = False):
    e = dict(env)
    e.pop("DDP_PROFILE_RUN", None)
    if mode:
        e["DDP_PROFILE_RUN"] = tempfile.mkdtemp(prefix="companion_bench_")
        e["DDP_PROFILE_MODE"] = mode
        e["DDP_PROFILE_FORMAT"] = "2"  # what ddp_profile sets (python/ddp_profile/layout.py HEARTBEAT_FORMAT_VERSION)
    out = subprocess.run([torchrun, "--nproc-per-node", "2", os.path.join(ROOT, "bench", "companion_step.py"),
                          "--variant", variant, "--epochs", str(epochs)], env=e, capture_output=True, text=True,
                         check=True).stdout
    line = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    return line if full else line["step_ms"]


def typical(v: list) -> float:
    # The median step: the first step (the loader's first batch, allocations) and a profiler's one trace-export step
    # are not what a step costs.
    return statistics.median(v[1:])


res = {k: [] for k in ["plain", "attached", "profiler", "record", "check"]}
for _ in range(args.rounds):
    res["plain"].append(run("plain"))
    res["attached"].append(run("attached"))
    res["profiler"].append(run("profiler"))
    res["record"].append(run("attached", "record"))
    res["check"].append(run("attached", "check"))
# The paired run: one process, epochs alternating plain / through the companion's passthrough.
pair = run("paired", epochs=12, full=True)
by = {0: [], 1: []}
for t, ep in zip(pair["step_ms"], pair["epoch"]):
    if ep >= 2:  # the first two epochs warm the caches and the allocator
        by[ep % 2].append(t)
paired = statistics.median(by[1]) / statistics.median(by[0])
m = {k: statistics.median(typical(v) for v in runs) for k, runs in res.items()}
total = {k: statistics.median(sum(v) for v in runs) for k, runs in res.items()}
verified = statistics.median(statistics.fmean(v[:3]) for v in res["check"])
rest = statistics.median(statistics.median(v[3:]) for v in res["check"])
print(f"median step (ms, median of {args.rounds} rounds): " + ", ".join(f"{k} {v:.3f}" for k, v in m.items()))
print("whole loop (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in total.items()))
print(f"attached, no ddp_profile / plain, paired     {paired:.3f}   (target <= 1.01; one process, epochs alternating)")
print(f"  the same, separate processes              {m['attached'] / m['plain']:.3f}   (information: process-to-process noise)")
print(f"companion record mode / torch.profiler      {m['record'] / m['profiler']:.3f}   (target <= 1.02; whole loop "
      f"{total['record'] / total['profiler']:.3f}: the companion writes its trace at exit, the script at its last step)")
print(f"check mode: verified step {verified:.2f} ms, other steps {rest:.2f} ms, plain {m['plain']:.2f} ms")
if os.path.exists(args.ddp_profile):
    out = tempfile.mkdtemp(prefix="companion_bench_check_")
    t = time.perf_counter()
    rc = subprocess.run([args.ddp_profile, "--check", "--out", out, "--resume-arg", "--resume {ckpt}", "--", torchrun,
                         "--nproc-per-node", "2", os.path.join(ROOT, "examples", "seed_job.py"), "--ckpt",
                         os.path.join(out, "ckpt.pt")], env=env, capture_output=True).returncode
    print(f"ddp_profile --check of the seed job: {time.perf_counter() - t:.1f} s, exit {rc}   (target < 90 s)")
