"""The seed's job in Python, profiled with PyTorch's own profiler: one Kineto trace per rank.

MLP 128-512-2, AdamW lr 1e-3, batch 64 per rank, DistributedSampler, DataLoader with 2 workers, DDP over gloo,
torch.profiler around the steps (wait 1, warmup 1, active N), one trace per rank written by
tensorboard_trace_handler (<worker>.<pid>.<ts>.pt.trace.json) or export_chrome_trace (--export-name).

Planted causes (--plant), so tests know the answer the analysis must find:
  slow-data:R      rank R's Dataset sleeps per sample (the DataLoader cannot keep up)
  slow-forward:R   rank R sleeps inside forward
  slow-optimizer:R rank R sleeps inside the optimizer step
  host-work:R      rank R works on the batch between the loader and the forward (tensor operators, no sleep: the
                   profiler records them, and no stage holds them)
Run under torchrun:  torchrun --nproc-per-node 2 kineto_job.py --out DIR [--plant slow-data:1] [--steps 30]
With the remedy for Gloo's collective tail:  chrt -b 0 torchrun --nproc-per-node 2 kineto_job.py --out DIR --pin
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Synthetic(Dataset):
    def __init__(self, n, features, seed, sleep_s):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=g)
        self.y = (self.x[:, 0] > 0).long()
        self.sleep_s = sleep_s

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.x[i], self.y[i]


class MLP(nn.Module):
    def __init__(self, features, hidden, sleep_s):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 2))
        self.sleep_s = sleep_s

    def forward(self, x):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.net(x)


def planted(spec, rank):
    """{'slow-data': seconds, ...} for this rank."""
    out = {}
    for p in spec:
        kind, r = p.split(":")
        if int(r) == rank:
            out[kind] = True
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--plant", action="append", default=[])
    ap.add_argument("--export-name", default="", help="write <out>/<name>rank<R>.json with export_chrome_trace")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=1, help="profiling cycles (schedule repeat): one file per cycle")
    ap.add_argument("--default-worker-name", action="store_true",
                    help="tensorboard_trace_handler's own worker name (<host>_<pid>): the rank is only in "
                         "distributedInfo, as the PyTorch docs' snippet writes it")
    ap.add_argument("--record-shapes", action="store_true", help="record_shapes=True: collectives carry sizes")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the model and batches on cuda:<LOCAL_RANK mod GPUs>, CUDA activity profiled too; "
                         "NCCL when every rank has a GPU of its own, else Gloo with CUDA tensors")
    ap.add_argument("--pin", action="store_true",
                    help="pin each local rank to its own share of the cores before Gloo starts its threads (with "
                         "`chrt -b 0 torchrun ...`: the remedy docs/stalls.md gives for the collective_tail flag)")
    args = ap.parse_args()

    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        local, nlocal = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        share = max(1, len(cpus) // nlocal)
        os.sched_setaffinity(0, cpus[local * share:(local + 1) * share] or cpus)
    cuda = args.device == "cuda"
    device = torch.device("cpu")
    backend = "gloo"
    if cuda:
        local, nlocal = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        gpus = torch.cuda.device_count()
        device = torch.device("cuda", local % gpus)
        torch.cuda.set_device(device)
        # NCCL refuses two ranks on one GPU: then the ranks share it through Gloo with CUDA tensors.
        backend = "nccl" if nlocal <= gpus else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    p = planted(args.plant, rank)
    # slow-data: 1.6 ms per sample, so the input's wait outweighs what a busy machine adds to the allreduce (the
    # committed slow-data-rank1 traces were recorded at 0.4 ms, on a quiet machine: tests/data/README.md).
    data = Synthetic(10000, 128, 0, 0.0016 if p.get("slow-data") else 0.0)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler, num_workers=args.workers, drop_last=True, pin_memory=cuda,
                        persistent_workers=args.workers > 0)
    model = DDP(MLP(128, 512, 0.004 if p.get("slow-forward") else 0.0).to(device),
                device_ids=[device.index] if backend == "nccl" else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    slow_opt = 0.004 if p.get("slow-optimizer") else 0.0
    host_work = p.get("host-work", False)

    os.makedirs(args.out, exist_ok=True)
    active = args.steps
    worker = None if args.default_worker_name else f"rank{rank}"
    handler = None if args.export_name else tensorboard_trace_handler(args.out, worker_name=worker)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(activities=activities,
                   schedule=schedule(wait=1, warmup=1, active=active, repeat=args.cycles),
                   on_trace_ready=handler, record_shapes=args.record_shapes)
    total = args.cycles * (active + 2)
    steps = 0
    epoch = 0
    with prof:
        while steps < total:
            sampler.set_epoch(epoch)
            for x, y in loader:
                if cuda:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                if host_work:  # ~5 ms of operators on a 2M-element copy; x itself unchanged
                    x = x + torch.sin(x.repeat(32, 8)).mean() * 0
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                if slow_opt:
                    with record_function("slow_optimizer_sleep"):
                        time.sleep(slow_opt)
                opt.step()
                prof.step()
                steps += 1
                if steps >= total:
                    break
            epoch += 1
    if args.export_name:
        prof.export_chrome_trace(os.path.join(args.out, f"{args.export_name}rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
