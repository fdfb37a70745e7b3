"""A second job for the companion: a small conv net with BatchNorm on synthetic 16x16 images, 10 classes.

Conv-BN-ReLU x2, Dropout, Linear; SGD momentum 0.9 with StepLR; CrossEntropyLoss(label_smoothing=0.1); a GradScaler
with autocast (enabled on CUDA only); SyncBatchNorm by default (on CPU, where torch's SyncBatchNorm refuses to run, a
small BatchNorm2d subclass that all-reduces the statistics with autograd-aware collectives). DDP over gloo/nccl.

    torchrun --nproc-per-node 2 examples/conv_job.py [--epochs 2] [--ckpt PATH] [--resume PATH] [--plant bn-no-sync]

--plant bn-no-sync  plain BatchNorm: every rank normalises with its own batch statistics.
"""
import argparse
import os
import random

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddp_profile  # ddp_profile

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--ckpt", default=None)
ap.add_argument("--resume", default=None)
ap.add_argument("--plant", choices=["bn-no-sync"], default=None)
args = ap.parse_args()
torch.set_num_threads(1)

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)

# ---- data: 2,048 images 3x16x16, class templates plus noise
g = torch.Generator().manual_seed(7)
templates = torch.randn(10, 3, 16, 16, generator=g)
labels = torch.randint(0, 10, (2048,), generator=g)
images = templates[labels] + 0.8 * torch.randn(2048, 3, 16, 16, generator=g)
dataset = TensorDataset(images, labels)
sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=32, sampler=sampler, drop_last=True)


class CpuSyncBatchNorm(nn.BatchNorm2d):
    """SyncBatchNorm's arithmetic for CPU tensors (torch's SyncBatchNorm and DDP refuse CPU modules): global mean/var
    over all ranks' batches (biased var to normalise, unbiased for the running estimate), the sums all-reduced with
    autograd so the backward is synced too. Like SyncBatchNorm, local when torch.distributed is not initialised."""

    def forward(self, x):
        if not self.training or not dist.is_initialized() or dist.get_world_size() == 1:
            return super().forward(x)
        dims = [0] + list(range(2, x.dim()))
        n = torch.tensor([x.numel() / x.shape[1]], dtype=x.dtype)
        s = torch.cat([x.sum(dims), (x * x).sum(dims), n])
        s = dist_fn.all_reduce(s)
        c = x.shape[1]
        total = s[2 * c]
        mean, var = s[:c] / total, s[c:2 * c] / total - (s[:c] / total) ** 2
        with torch.no_grad():
            self.num_batches_tracked += 1
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * total / (total - 1))
        shape = [1, c] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)


net = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(32, 10))
torch.manual_seed(0)
for m in net.modules():
    if hasattr(m, "reset_parameters"):
        m.reset_parameters()
if args.plant != "bn-no-sync" and cuda:
    net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
elif args.plant != "bn-no-sync":
    for m in net.modules():
        if type(m) is nn.BatchNorm2d:
            m.__class__ = CpuSyncBatchNorm
model = DDP(net.to(device), device_ids=[device.index] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=40, gamma=0.5)
scaler = torch.amp.GradScaler("cuda", enabled=cuda)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)


def loss_of(m, batch):
    with torch.autocast("cuda", enabled=cuda):
        return criterion(m(batch[0].to(device)), batch[1].to(device))


dp = ddp_profile.attach(model, optimizer, loss_fn=loss_of, sampler=sampler, scheduler=scheduler,  # ddp_profile
                        scaler=scaler)

start_epoch, step = 0, 0
if args.resume:
    state = dp.load(args.resume, map_location=device, weights_only=False)  # ddp_profile
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    start_epoch, step = state["epoch"], state["step"]
    torch.set_rng_state(state["rng"]["torch"].cpu())  # map_location=cuda moved it; RNG states live on the CPU
    random.setstate(state["rng"]["random"])
    if cuda:
        torch.cuda.set_rng_state(state["rng"]["cuda"].cpu())

for epoch in range(start_epoch, args.epochs):
    sampler.set_epoch(epoch)
    model.train()
    total, n = 0.0, 0
    for x, y in dp.loader(loader):  # ddp_profile
        loss = loss_of(model, (x, y))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        step += 1
        total, n = total + loss.item(), n + 1
    if rank == 0:
        print(f"epoch {epoch}: avg loss {total / max(n, 1):.4f}, step {step}, lr {scheduler.get_last_lr()[0]:.4f}",
              flush=True)
    if args.ckpt and rank == 0:
        state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "epoch": epoch + 1, "step": step,
                 "sampler_epoch": epoch + 1, "rng": {"torch": torch.get_rng_state(), "random": random.getstate()}}
        if cuda:
            state["rng"]["cuda"] = torch.cuda.get_rng_state()
        dp.save(state, args.ckpt)  # ddp_profile
    dist.barrier()

dist.destroy_process_group()
