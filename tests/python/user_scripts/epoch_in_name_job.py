"""A correct DDP script whose checkpoints keep their epoch in the file name, not in the file (checkpoints/epoch2.pt,
as many scripts and accelerate's checkpoint_N folders do): the saved dict holds the model, the optimizer and the RNG
streams; a resume reads the epoch back from the name. checkpoint.complete finds no epoch in the file; an exact
checkpoint.resume proves the run resumes without it (test_user_check.cpp).

    torchrun --nproc-per-node 2 epoch_in_name_job.py --ckpt-dir DIR [--epochs 3] [--resume DIR/epochN.pt]
"""
import argparse
import os
import random
import re

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--ckpt-dir", required=True)
ap.add_argument("--resume", default=None)
args = ap.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()

g = torch.Generator().manual_seed(7)
x_all = torch.randn(2048, 32, generator=g)
y_all = (x_all[:, :4].sum(1) > 0).long()
dataset = TensorDataset(x_all, y_all)
sampler = DistributedSampler(dataset, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
criterion = nn.CrossEntropyLoss()

start = 0
if args.resume:
    state = torch.load(args.resume, weights_only=False)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["random"])
    start = int(re.search(r"epoch(\d+)\.pt$", args.resume).group(1))  # the epoch is the file's name

for epoch in range(start, args.epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    if rank == 0:
        os.makedirs(args.ckpt_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "rng": {"torch": torch.get_rng_state(), "random": random.getstate()}},
                   os.path.join(args.ckpt_dir, "epoch%d.pt" % (epoch + 1)))
    dist.barrier()
dist.destroy_process_group()
