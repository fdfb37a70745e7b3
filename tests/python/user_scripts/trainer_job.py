"""A correct DDP job in the Trainer-class style of PyTorch's DDP tutorials (written here, not copied): the snapshot is
loaded before DDP wraps the model, a snapshot is saved at the end of every epoch holding the model, the optimizer,
the scheduler, the epochs run and the torch RNG (no step, no sampler position, no Python RNG: a resume at an epoch
boundary needs none of them), a per-epoch StepLR, dropout, gloo. The checks must pass it as it is.

    torchrun --nproc-per-node 2 trainer_job.py --snapshot PATH [--resume PATH] [--plant repeat-epoch]

--plant repeat-epoch: the snapshot says EPOCHS_RUN = epoch after finishing that epoch, so a resume trains the saved
epoch again (the published tutorial's off-by-one).
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddp_profile


class Trainer:
    def __init__(self, model: nn.Module, data: DataLoader, optimizer, scheduler, snapshot: str, resume: str,
                 repeat_epoch: bool) -> None:
        self.optimizer, self.scheduler, self.data = optimizer, scheduler, data
        self.snapshot, self.repeat_epoch = snapshot, repeat_epoch
        self.epochs_run = 0
        if resume:
            self._load(model, resume)  # before DDP: every rank loads the same snapshot
        self.model = DDP(model)
        self.dp = ddp_profile.attach(self.model, optimizer, loss_fn=lambda m, b: F.cross_entropy(m(b[0]), b[1]),
                                     sampler=data.sampler, scheduler=scheduler)

    def _load(self, model: nn.Module, path: str) -> None:
        snap = torch.load(path, weights_only=False)
        model.load_state_dict(snap["MODEL_STATE"])
        self.optimizer.load_state_dict(snap["OPTIMIZER_STATE"])
        self.scheduler.load_state_dict(snap["SCHEDULER_STATE"])
        torch.set_rng_state(snap["RNG_STATE"])
        self.epochs_run = snap["EPOCHS_RUN"]

    def _save(self, epoch: int) -> None:
        snap = {"MODEL_STATE": self.model.module.state_dict(), "OPTIMIZER_STATE": self.optimizer.state_dict(),
                "SCHEDULER_STATE": self.scheduler.state_dict(), "RNG_STATE": torch.get_rng_state(),
                "EPOCHS_RUN": epoch if self.repeat_epoch else epoch + 1}
        self.dp.save(snap, self.snapshot)

    def _run_batch(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self.data.sampler.set_epoch(epoch)
            self.model.train()
            for x, y in self.dp.loader(self.data):
                self._run_batch(x, y)
            self.scheduler.step()
            if dist.get_rank() == 0:
                self._save(epoch)
            dist.barrier()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapshot", required=True)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--plant", choices=["repeat-epoch"], default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(11)
    x = torch.randn(1024, 20, generator=g)
    y = (x[:, 0] * x[:, 1] > 0).long()
    data = DataLoader(TensorDataset(x, y), batch_size=32, sampler=DistributedSampler(TensorDataset(x, y), seed=2))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    Trainer(model, data, optimizer, scheduler, args.snapshot, args.resume, args.plant == "repeat-epoch").train(args.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
