"""Resumes ddp_profile's step-K checkpoint in PyTorch's own DDP and checks it lands where ddp_profile did.

Run under torchrun (2 gloo ranks), or as 2 processes with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set:
  torchrun --nproc-per-node 2 resume_ddp_checkpoint.py --data DATA.ddpd --ckpt RUN/checkpoints/stepK
           --steps N --expect RUN/checkpoints/stepN [--batch-size 64 --lr 1e-3 --seed 0 --accum 1]

The job is the seed's: MLP F-512-C (module names fc1/relu/fc2, as ddp_profile's), AdamW, mean cross-entropy,
DistributedSampler(shuffle, seed, drop_last) + DataLoader(batch, drop_last), the .ddpd file's normalisation
(x - mean) / std; with --accum K, K micro-batches a step, each loss divided by K, the first K-1 backwards inside
ddp.no_sync() (an epoch's batches cut to a multiple of K), as ddp_profile's --accum-steps. Every rank loads its own checkpoint file with torch.load(weights_only=True) — model and optimizer
(optimizer.load_state_dict: PyTorch's layout) — trains from step K to N, and compares its parameters bitwise with
ddp_profile's step-N checkpoint. Exit 0 when equal (or within --atol: another PyTorch version's kernels round
differently); 1 naming the first parameter that differs.
"""
import argparse
import contextlib
import os
import struct
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HEADER = struct.Struct("<8sIIQQQII4I")


class Ddpd(Dataset):
    """A .ddpd file (docs/data-format.md), normalised as ddp_profile's loader does."""

    def __init__(self, path):
        raw = open(path, "rb").read()
        magic, version, f, n, rec_off, stats_off, *_ = HEADER.unpack_from(raw)
        assert magic == b"DDPDATA1" and version in (1, 2), path
        stats = np.frombuffer(raw, "<f4", 2 * f, stats_off)
        mean, std = stats[:f], np.where(stats[f:] > 0, stats[f:], 1).astype("<f4")
        recs = np.frombuffer(raw, np.dtype([("x", "<f4", (f,)), ("y", "<i4")]), n, rec_off)
        self.x = torch.from_numpy(((recs["x"] - mean) / std).astype("<f4"))
        self.y = torch.from_numpy(recs["y"].astype(np.int64))
        self.features = f

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def load(path):
    # torch 1.13's weights-only unpickler did not take floats yet (its opcode BINFLOAT): only torch >= 2 loads our
    # checkpoints weights-only, as users should; 1.13 (Debian's, the LibTorch we build on) checks the numbers.
    weights_only = int(torch.__version__.split(".")[0]) >= 2
    return torch.load(path, weights_only=weights_only)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--atol", type=float, default=0.0, help="0: bitwise equal")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    ckpt = load(os.path.join(args.ckpt, f"rank{rank}.pt"))
    data = Ddpd(args.data)
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(data.features, args.hidden), relu=nn.ReLU(),
                                      fc2=nn.Linear(args.hidden, args.classes)))
    model.load_state_dict(ckpt["model"])
    ddp = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    opt.load_state_dict(ckpt["optimizer"])
    progress = ckpt["progress"]
    step, epoch, skip = int(progress["global_step"]), int(progress["epoch"]), int(progress["batches_in_epoch"])

    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True, num_workers=0)
    loss_fn = nn.CrossEntropyLoss()
    k = args.accum
    while step < args.steps:
        sampler.set_epoch(epoch)
        usable = len(loader) // k * k
        for i, (x, y) in enumerate(loader):
            if i < skip:
                continue
            if step >= args.steps or i >= usable:
                break
            micro = i % k
            if micro == 0:
                opt.zero_grad()
            with ddp.no_sync() if micro < k - 1 else contextlib.nullcontext():
                loss = loss_fn(ddp(x), y)
                (loss / k if k > 1 else loss).backward()
            if micro == k - 1:
                opt.step()
                step += 1
        epoch, skip = epoch + 1, 0

    expect = load(os.path.join(args.expect, f"rank{rank}.pt"))["model"]
    worst = 0.0
    for name, p in model.state_dict().items():
        diff = (p - expect[name]).abs().max().item()
        if not torch.equal(p, expect[name]) and not diff <= args.atol:
            print(f"rank {rank}: {name} differs from ddp_profile's step {args.steps} (max |diff| {diff:.3g})")
            sys.exit(1)
        worst = max(worst, diff)
    how = "bitwise equal to" if worst == 0 else f"within {worst:.3g} of"
    print(f"rank {rank}: step {args.steps} parameters {how} ddp_profile's (torch {torch.__version__})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
