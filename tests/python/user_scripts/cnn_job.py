"""A correct plain DDP loop, no ddp_profile line: a small CNN with BatchNorm (running statistics are buffers, kept
equal across ranks by DDP's broadcast), AdamW with a linear warm-up (LambdaLR stepped per optimizer step), gradient
clipping, an epoch checkpoint holding model, optimizer, scheduler and epoch, and a peek at the first batch's shape
through a throw-away iterator at each epoch's start. Every check must pass it as it is.

    torchrun --nproc-per-node 2 cnn_job.py --out DIR [--epochs N] [--resume PATH] [--plant NAME]

Planted faults (each breaks one invariant of docs/checks.md):
  bn-unsynced          DDP(broadcast_buffers=False) without SyncBatchNorm: BatchNorm's running statistics drift
                       apart, each rank keeping its own batches'
  lr-per-rank          rank 1's optimizer is built with twice the learning rate
  seed-per-rank        the sampler's seed is the rank: the ranks' shards overlap and leave items unread
  double-step          the optimizer steps twice per iteration
  no-zero-grad         zero_grad is never called: gradients pile up across steps
  head-after-ddp       a new head replaces the last layer after DDP(...) wrapped the model (found unused parameters
                       on): DDP never reduces its gradients, each rank steps its own
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Shapes(Dataset):
    """Synthetic 1x16x16 images: the class is which quadrant holds the bright square."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(3)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        self.noise = torch.randn(n, 1, 16, 16, generator=g) * 0.3

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        y = int(self.labels[i])
        x = self.noise[i].clone()
        r, c = (y // 2) * 8, (y % 2) * 8
        x[:, r:r + 8, c:c + 8] += 1.0
        return x, y


def net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 4))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--items", type=int, default=960)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--resume", default="")
    ap.add_argument("--plant", default="")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = net()
    lr = 3e-3 * (2 if a.plant == "lr-per-rank" and rank == 1 else 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    data = Shapes(a.items)
    sampler = DistributedSampler(data, seed=rank if a.plant == "seed-per-rank" else 0)
    loader = DataLoader(data, batch_size=a.batch, sampler=sampler, num_workers=a.workers)
    model = DDP(model, broadcast_buffers=a.plant != "bn-unsynced", find_unused_parameters=a.plant == "head-after-ddp")
    if a.plant == "head-after-ddp":
        model.module[9] = nn.Linear(16, 4)
        opt.add_param_group({"params": list(model.module[9].parameters())})
    warmup = len(loader)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    start = 0
    if a.resume:  # every rank loads the same file: the replicas stay equal
        ck = torch.load(a.resume, map_location="cpu", weights_only=True)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        start = ck["epoch"] + 1
    running = torch.zeros(())
    for epoch in range(start, a.epochs):
        sampler.set_epoch(epoch)
        shape = tuple(next(iter(loader))[0].shape)  # a peek: that batch is never trained on
        model.train()
        for step, (x, y) in enumerate(loader):
            if a.plant != "no-zero-grad":
                opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if a.plant == "double-step":
                opt.step()
            sched.step()
            running = running + loss.detach()
        if rank == 0:
            print("epoch %d batch %s mean loss %.4f" % (epoch, shape, float(running) / len(loader)), flush=True)
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "epoch": epoch}, os.path.join(a.out, "last.pt"))
        running = torch.zeros(())
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
