"""A Hugging Face accelerate script with no ddp_profile line: Accelerator(cpu=True, gradient_accumulation_steps=2),
prepare(model, optimizer, loader, scheduler), the accumulate() context, save_state after every epoch (the epoch
counter registered for checkpointing) and load_state to resume. Launched by torchrun or by
`accelerate launch --cpu --num_processes 2`.

--plant unprepared-loader: the loader is left out of prepare(): every rank reads the whole dataset in the same
  order: data.shard_rule fails.
--plant unseeded-shuffle: accelerate's default sampler, whose shuffle restarts with the process: a resume trains the
  first epoch's order again: checkpoint.resume fails."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from torch.utils.data import DataLoader, TensorDataset


def dataset(n: int = 512, features: int = 20, classes: int = 4) -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    return TensorDataset(x, (x @ w).argmax(1))


class Progress:
    """The epochs done, saved and restored with the accelerator's state."""

    def __init__(self) -> None:
        self.epoch = 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch}

    def load_state_dict(self, d: dict) -> None:
        self.epoch = int(d["epoch"])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--ckpt-dir", default="accelerate_ckpts")
    p.add_argument("--resume", default="")
    p.add_argument("--plant", default="")
    a = p.parse_args()
    # A seedable sampler makes each epoch's shuffle a function of (seed, epoch), so a resume sees the same order.
    acc = Accelerator(cpu=True, gradient_accumulation_steps=2,
                      dataloader_config=DataLoaderConfiguration(use_seedable_sampler=a.plant != "unseeded-shuffle"))
    set_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=8, gamma=0.8)
    loader = DataLoader(dataset(), batch_size=16, shuffle=True)
    if a.plant == "unprepared-loader":
        model, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
    else:
        model, optimizer, loader, scheduler = acc.prepare(model, optimizer, loader, scheduler)
    progress = Progress()
    acc.register_for_checkpointing(progress)
    if a.resume:
        acc.load_state(a.resume)
    for epoch in range(progress.epoch, a.epochs):
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            with acc.accumulate(model):
                loss = F.cross_entropy(model(x), y)
                acc.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            total += loss.item()
        progress.epoch = epoch + 1
        acc.save_state(os.path.join(a.ckpt_dir, "epoch%d" % epoch))
        acc.print("epoch %d: mean loss %.4f" % (epoch, total / len(loader)))
    acc.end_training()


if __name__ == "__main__":
    main()
