"""The seed's job in plain PyTorch, with the ddp_profile companion's few lines (marked # ddp_profile).

A synthetic, deterministic dataset (10,000 x 128 float32, 2 classes from a fixed random linear rule), an MLP
128-512-2, AdamW lr 1e-3, CrossEntropyLoss, batch 64 per rank, DistributedSampler(shuffle=True, seed=0), DDP over
gloo (nccl on CUDA). Without DDP_PROFILE_RUN in the environment the companion does nothing.

    torchrun --nproc-per-node 2 examples/seed_job.py [--epochs 2] [--accum N] [--ckpt PATH] [--resume PATH]
                                                     [--plant KIND]

--plant KIND plants a user's mistake, so a check knows the answer it must find:
  no-set-epoch       never calls sampler.set_epoch: every epoch repeats the same order
  no-dist-sampler    a plain shuffling DataLoader: every rank trains on the whole dataset
  sum-loss           CrossEntropyLoss(reduction="sum"): gradients scale with the batch size
  rank-param         after DDP(), rank 1 adds 1e-3 to a parameter: the replicas diverge
  accum-no-sync      gradient accumulation without model.no_sync(): an allreduce per micro-batch
  ckpt-model-only    the checkpoint holds model.state_dict() only
  resume-model-only  a resume restores the model only
  crash              rank 1 raises at optimizer step 3
"""
import argparse
import contextlib
import os
import random
import re

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddp_profile  # ddp_profile

PLANTS = ["no-set-epoch", "no-dist-sampler", "sum-loss", "rank-param", "accum-no-sync", "ckpt-model-only",
          "resume-model-only", "crash"]
ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--accum", type=int, default=1)
ap.add_argument("--ckpt", default=None)
ap.add_argument("--resume", default=None)
ap.add_argument("--plant", choices=PLANTS, default=None)
ap.add_argument("--amp", choices=["off", "fp16", "bf16"], default="off",
                help="on CUDA: autocast in this dtype; fp16 with torch.amp.GradScaler (saved in the checkpoint)")
args = ap.parse_args()
plant = args.plant
accum = max(args.accum, 2 if plant == "accum-no-sync" else 1)
torch.set_num_threads(1)

# ---- distributed setup
# Under srun (no torchrun) the rank and the rendezvous come from Slurm's variables: the job's first host and
# 15000 + the job id's last 4 digits, as PyTorch Lightning (and ddp_profile's own workers) derive them.
if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
    first_host = re.match(r"([^,\[]*)(?:\[(\d+))?", os.environ["SLURM_JOB_NODELIST"])
    os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=os.environ["SLURM_NTASKS"],
                      LOCAL_RANK=os.environ.get("SLURM_LOCALID", "0"))
    os.environ.setdefault("MASTER_ADDR", first_host.group(1) + (first_host.group(2) or ""))
    os.environ.setdefault("MASTER_PORT", str(15000 + int(os.environ["SLURM_JOB_ID"]) % 10000))
cuda = torch.cuda.is_available()
# One GPU per local rank takes NCCL; more ranks than GPUs share them through Gloo with CUDA tensors (NCCL refuses two
# ranks on one GPU).
gpus = torch.cuda.device_count() if cuda else 0
local_rank, local_world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
nccl = cuda and local_world <= gpus
dist.init_process_group("nccl" if nccl else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", local_rank % gpus) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.amp) if cuda else None
scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None

# ---- data: 10,000 x 128, labels from a fixed random linear rule
g = torch.Generator().manual_seed(1234)
x_all = torch.randn(10_000, 128, generator=g)
w_rule = torch.randn(128, generator=g)
y_all = (x_all @ w_rule > 0).long()
dataset = TensorDataset(x_all, y_all)
if plant == "no-dist-sampler":
    sampler = None
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
else:
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)

# ---- model, optimizer, loss
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 2)).to(device),
            device_ids=[device.index] if nccl else None)
if plant == "rank-param" and rank == 1:
    with torch.no_grad():
        next(model.module.parameters()).view(-1)[0] += 1e-3
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss(reduction="sum" if plant == "sum-loss" else "mean")



def loss_of(m, batch):  # the reference's loss on a batch: the training step's forward, autocast included
    with torch.autocast("cuda", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext():
        return criterion(m(batch[0].to(device)), batch[1].to(device))


dp = ddp_profile.attach(model, optimizer, loss_fn=loss_of, sampler=sampler, scaler=scaler)  # ddp_profile

# ---- resume
start_epoch, step = 0, 0
if args.resume:
    state = dp.load(args.resume, map_location=device, weights_only=False)  # ddp_profile (instead of torch.load)
    model.module.load_state_dict(state["model"] if "model" in state else state)
    if plant != "resume-model-only" and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, step = state["epoch"], state["step"]
        # RNG states are CPU ByteTensors: a load with map_location=cuda moved them (torch refuses them there).
        torch.set_rng_state(state["rng"]["torch"].cpu())
        random.setstate(state["rng"]["random"])
        if cuda and "cuda" in state["rng"]:
            torch.cuda.set_rng_state(state["rng"]["cuda"].cpu())
        if scaler is not None and "scaler" in state:
            scaler.load_state_dict(state["scaler"])

# ---- training
for epoch in range(start_epoch, args.epochs):
    if sampler is not None and plant != "no-set-epoch":
        sampler.set_epoch(epoch)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total, n = 0.0, 0
    for i, (x, y) in enumerate(dp.loader(loader)):  # ddp_profile
        x, y = x.to(device), y.to(device)
        last = (i + 1) % accum == 0
        sync = contextlib.nullcontext() if last or plant == "accum-no-sync" else model.no_sync()
        autocast = torch.autocast("cuda", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with sync:
            with autocast:
                loss = criterion(model(x), y) / accum
            (scaler.scale(loss) if scaler else loss).backward()
        if last:
            if plant == "crash" and rank == 1 and step == 3:
                raise RuntimeError("planted crash at step 3")
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
        total, n = total + loss.item(), n + 1
    if rank == 0:
        print(f"epoch {epoch}: avg loss {total / max(n, 1):.4f}, step {step}", flush=True)
    if args.ckpt and rank == 0:
        if plant == "ckpt-model-only":
            state = model.module.state_dict()
        else:
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1,
                     "step": step, "sampler_epoch": epoch + 1,
                     "rng": {"torch": torch.get_rng_state(), "random": random.getstate()}}
            if cuda:
                state["rng"]["cuda"] = torch.cuda.get_rng_state()
            if scaler is not None:
                state["scaler"] = scaler.state_dict()
        dp.save(state, args.ckpt)  # ddp_profile (instead of torch.save)
    dist.barrier()

dist.destroy_process_group()
