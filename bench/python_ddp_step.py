"""PyTorch's own Python DDP on the default job, for grad_path_bench's comparison (issue 11).

The default job of ddp_profile --record: synthetic data 10,000 x 128 (2 classes), MLP 128-512-2, AdamW lr 1e-3,
batch 64 per rank, two gloo ranks on loopback started with the environment torchrun would give them, one intra-op
thread per rank. A DistributedSampler and a DataLoader with --workers processes (0: the main process loads). Prints
the median step time (next batch -> forward -> backward with DDP's allreduce -> optimizer step), the slower rank's.

    python3 bench/python_ddp_step.py --workers 2 [--steps 300]
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def rank_main(rank, world, port, workers, steps, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10000, 128, generator=g)
    y = (x[:, 0] > 0).long()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler, num_workers=workers, drop_last=True,
                        persistent_workers=workers > 0)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    epoch = 0
    while len(times) < steps:
        sampler.set_epoch(epoch)
        it = iter(loader)
        while len(times) < steps:
            t0 = time.perf_counter()
            try:
                xb, yb = next(it)
            except StopIteration:
                break
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
            times.append((time.perf_counter() - t0) * 1e3)
        epoch += 1
    median = torch.tensor([statistics.median(times[10:])])
    dist.all_reduce(median, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put(median.item())
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, a.workers, a.steps, out)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit("a rank failed")
    print(f"python_ddp_step_ms={out.get():.3f}")


if __name__ == "__main__":
    main()
