"""A ~100 MB model for bench/check_mode_bench.py: an MLP 1024-4096-4096-1024-2 (25.2 M parameters, 101 MB in
float32), SGD, a DistributedSampler, gloo, the companion attached. Rank 0 prints one JSON line: the median step time
(ms) over the steps after the first 6 (warm-up and the verified steps, which dump tensors by design).

    torchrun --nproc-per-node 2 bench/check_mode_step.py [--steps 30] [--unmodified]

--unmodified: no ddp_profile line (the loader iterated as it is): under ddp_profile, ddp_profile.auto attaches.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddp_profile

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--unmodified", action="store_true")
args = ap.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
g = torch.Generator().manual_seed(0)
x = torch.randn(64 * 2 * args.steps, 1024, generator=g)
y = torch.randint(0, 2, (x.shape[0],), generator=g)
data = TensorDataset(x, y)
sampler = DistributedSampler(data, seed=0)
loader = DataLoader(data, batch_size=64, sampler=sampler)
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1024),
                          nn.ReLU(), nn.Linear(1024, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
if not args.unmodified:
    dp = ddp_profile.attach(model, optimizer, loss_fn=lambda m, b: criterion(m(b[0]), b[1]), sampler=sampler)
    loader = dp.loader(loader)
times = []
t = time.perf_counter()
for xb, yb in loader:
    optimizer.zero_grad(set_to_none=True)
    criterion(model(xb), yb).backward()
    optimizer.step()
    now = time.perf_counter()
    times.append((now - t) * 1e3)
    t = now
if dist.get_rank() == 0:
    steady = times[6:]
    print(json.dumps({"median_ms": statistics.median(steady), "mean_ms": statistics.mean(steady), "steps": len(steady),
                      "parameters": sum(p.numel() for p in model.parameters())}), flush=True)
dist.destroy_process_group()
