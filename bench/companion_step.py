"""One variant of the seed's job for bench/companion_bench.py: the same MLP, data and loop as examples/seed_job.py,
timing every optimizer step. Run under torchrun; rank 0 prints one JSON line with the step times (ms).

    --variant plain      the script without the companion (not imported)
    --variant attached   the companion's lines, no ddp_profile around it (DDP_PROFILE_RUN unset)
    --variant profiler   torch.profiler with the companion's record schedule (wait 1, warmup 1, active 5)
    --variant paired     in one process, epochs alternate between the plain loader and the attached companion's
                         dp.loader (no ddp_profile around it): a paired comparison on the same cores and memory
    (DDP_PROFILE_RUN/MODE set by the bench: the companion's record or check mode)
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--variant", choices=["plain", "attached", "profiler", "paired"], default="plain")
ap.add_argument("--epochs", type=int, default=2)
args = ap.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
if len(os.sched_getaffinity(0)) >= world:  # each rank on its own core, as grad_path_bench runs ours: less noise
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank]})
g = torch.Generator().manual_seed(0)
x = torch.randn(10_000, 128, generator=g)
y = (x @ torch.randn(128, generator=g) > 0).long()
dataset = TensorDataset(x, y)
sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 2)))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss()
batches = loader
dp = None
if args.variant != "plain":
    import ddp_profile

    dp = ddp_profile.attach(model, opt, loss_fn=lambda m, b: crit(m(b[0]), b[1]), sampler=sampler)
prof = None
if args.variant == "profiler":
    from torch.profiler import ProfilerActivity, profile, schedule

    prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=5, repeat=1),
                   record_shapes=True, on_trace_ready=lambda p: p.export_chrome_trace(f"/tmp/bench_prof_rank{rank}.json"))
    prof.start()
times = []
epoch_of_step = []
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    t = time.perf_counter()
    through_companion = dp is not None and (args.variant != "paired" or epoch % 2 == 1)
    for xb, yb in (dp.loader(loader) if through_companion else loader):
        opt.zero_grad(set_to_none=True)
        crit(model(xb), yb).backward()
        opt.step()
        if prof is not None:
            prof.step()
        now = time.perf_counter()
        times.append((now - t) * 1e3)
        epoch_of_step.append(epoch)
        t = now
if prof is not None:
    prof.stop()
if rank == 0:
    print(json.dumps({"variant": args.variant, "step_ms": times, "epoch": epoch_of_step}), flush=True)
dist.destroy_process_group()
