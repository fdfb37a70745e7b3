"""A correct DDP training loop in a style of its own, with one silent error plantable at a time (--plant KIND): the
checks of whether the training is right must pass it as it is and name each planted error.

Style: 2048 x 64 samples, an MLP 64-512-512-2 with dropout, SGD with momentum and a StepLR stepped per optimizer
step, gradient accumulation over 2 micro-batches with the forward inside model.no_sync(), a checkpoint every 20
optimizer steps mid-epoch holding the global step (the resume skips the batches it already trained on), gloo.

--plant KIND:
  single-logit     the loss is cross_entropy over one logit (PyTorch's DDP tutorial): 0, every gradient exactly 0
  replaced-layer   the head is replaced after the optimizer was built: its parameters are in no param_group
  no-zero-grad     optimizer.zero_grad() is never called: gradients pile up step after step
  eval-mode        model.eval() for a validation before training, model.train() never called (dropout off)
  rank-split       random_split after torch.manual_seed(rank): each rank splits the data differently
  nan              the learning rate is 1e12: the loss and gradients become non-finite after a few steps
  sched-per-micro  scheduler.step() on every micro-batch: the learning rate decays twice too fast
  leak             running = running + loss: every step's graph is kept (memory grows each step)
  leak-outputs     every step's output appended to a list with its graph (outputs.append(out))
  leak-cache       every step's detached output kept in a dict keyed by the step, never cleared
  unfreeze-late    fine-tuning's gradual unfreezing done late: the first layer frozen when the optimizer (built on the
                   parameters that require grad, as fine-tuning guides write it) and DDP are built, unfrozen at step 5:
                   no optimizer steps it and DDP never averages its gradient
  loader-rng       the loader draws its base seed from the global RNG: a mid-epoch resume restores the RNG, then the
                   new iterator draws from it, and every dropout mask after it differs from the straight run's
"""
import argparse
import contextlib

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, random_split

import ddp_profile

PLANTS = ["single-logit", "replaced-layer", "no-zero-grad", "eval-mode", "rank-split", "nan", "sched-per-micro", "leak",
          "leak-outputs", "leak-cache", "loader-rng", "unfreeze-late"]
ap = argparse.ArgumentParser()
ap.add_argument("--plant", choices=PLANTS, default=None)
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--ckpt", default=None)
ap.add_argument("--resume", default=None)
ap.add_argument("--epoch-metric", action="store_true", help="gather each step's detached output for an epoch-end "
                "accuracy, released at the epoch's end (correct)")
args = ap.parse_args()
plant = args.plant
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
ACCUM, EVERY = 2, 20

g = torch.Generator().manual_seed(7)
x_all = torch.randn(2560, 64, generator=g)
y_all = (x_all[:, :8].sum(1) > 0).long()
full = TensorDataset(x_all, y_all)
if plant == "rank-split":
    torch.manual_seed(rank)
    train_set, _ = random_split(full, [2048, 512])
else:
    train_set, _ = random_split(full, [2048, 512], generator=torch.Generator().manual_seed(3))
sampler = DistributedSampler(train_set, shuffle=True, seed=5)
# The loader draws its workers' base seed from its own generator, not the global RNG: a mid-epoch resume restores the
# global RNG before iterating again, and that draw would shift every dropout mask after it.
loader = DataLoader(train_set, batch_size=32, sampler=sampler,
                    generator=None if plant == "loader-rng" else torch.Generator())

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2))
if plant == "unfreeze-late":
    net[0].requires_grad_(False)
optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=1e12 if plant == "nan" else 0.05,
                            momentum=0.9)
if plant == "replaced-layer":
    net[5] = nn.Linear(512, 2)
model = DDP(net)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.9)
cross_entropy = nn.CrossEntropyLoss()


def criterion(out, y):
    if plant == "single-logit":  # one class: log-softmax of a single logit is 0 whatever the weights
        return cross_entropy(out[:, :1], torch.zeros_like(y))
    return cross_entropy(out, y)


dp = ddp_profile.attach(model, optimizer, loss_fn=lambda m, b: criterion(m(b[0]), b[1]), sampler=sampler,
                        scheduler=scheduler)

step = 0
if args.resume:
    state = dp.load(args.resume, weights_only=False)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    step = state["step"]
    torch.set_rng_state(state["rng"])

if plant == "eval-mode":
    model.eval()
    with torch.no_grad():
        model(x_all[2048:2080])  # a validation pass before training
else:
    model.train()
running = torch.zeros(())
kept, cache, gathered = [], {}, []
steps_per_epoch = len(loader) // ACCUM
for epoch in range(step // steps_per_epoch, args.epochs):
    sampler.set_epoch(epoch)
    skip = (step - epoch * steps_per_epoch) * ACCUM  # batches this epoch already trained on (a mid-epoch resume)
    for i, (x, y) in enumerate(dp.loader(loader)):
        if i < skip:
            continue
        last = (i + 1) % ACCUM == 0
        with contextlib.nullcontext() if last else model.no_sync():
            out = model(x)
            loss = criterion(out, y) / ACCUM
            loss.backward()
        if plant == "leak":
            running = running + loss
        if plant == "leak-outputs":
            kept.append(out)
        if plant == "leak-cache":
            cache[(epoch, i)] = out.detach()
        if args.epoch_metric:
            gathered.append((out.detach().argmax(1), y))
        if plant == "sched-per-micro":
            scheduler.step()
        if not last:
            continue
        optimizer.step()
        if plant != "no-zero-grad":
            optimizer.zero_grad(set_to_none=True)
        if plant != "sched-per-micro":
            scheduler.step()
        step += 1
        if plant == "unfreeze-late" and step == 5:
            net[0].requires_grad_(True)
        if args.ckpt and rank == 0 and step % EVERY == 0:
            dp.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                     "scheduler": scheduler.state_dict(), "step": step, "epoch": epoch,
                     "rng": torch.get_rng_state()}, args.ckpt)
        if i + 1 >= steps_per_epoch * ACCUM:
            break
    if gathered:
        accuracy = sum(int((p == t).sum()) for p, t in gathered) / sum(len(t) for _, t in gathered)
        gathered.clear()
dist.barrier()
dist.destroy_process_group()
if rank == 0:
    print("done: %d steps, lr %.4g" % (step, optimizer.param_groups[0]["lr"]), flush=True)
