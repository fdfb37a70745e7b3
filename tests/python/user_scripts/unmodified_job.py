"""A DDP training script with no ddp_profile line: a Trainer class in the shape of the PyTorch DDP tutorial's
multi-GPU torchrun script (torchrun's environment, a DistributedSampler, torch.save snapshots each epoch, a resume
from the snapshot), on the CPU with Gloo. `ddp_profile --check -- torchrun ... unmodified_job.py` must check it as it
is (ddp_profile.auto finds the model, optimizer, loader and snapshots).

--plant no-set-epoch: the sampler's epoch is never set (every epoch draws epoch 0's order): data.shard_rule fails.
--plant tutorial-snapshot: the snapshot holds only the weights and the epoch, as the tutorial's does; a resume
  restarts the optimizer's momentum from zero: checkpoint.complete names what is missing.
--plant safetensors-weights: the snapshot is the weights alone, written with safetensors' save_file:
  checkpoint.complete names what is missing from that file.
--attach: the one line the README shows for the single-process reference, `ddp_profile.attach(model, optimizer,
  loss_fn=...)` after DDP(...), and nothing else changed: every check the script passes without it still passes,
  and numerics.reference runs."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def dataset(n: int = 512, features: int = 20, classes: int = 4) -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    return TensorDataset(x, (x @ w).argmax(1))


class Trainer:
    def __init__(self, model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer, snapshot: str,
                 plant: str, attach: bool = False) -> None:
        self.rank = int(os.environ["RANK"])
        self.model, self.loader, self.optimizer = model, loader, optimizer
        self.snapshot, self.plant, self.attach = snapshot, plant, attach
        self.epochs_run = 0

    def load(self, path: str) -> None:
        snap = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(snap["MODEL_STATE"])
        self.epochs_run = snap["EPOCHS_RUN"]
        if "OPTIMIZER_STATE" in snap:
            self.optimizer.load_state_dict(snap["OPTIMIZER_STATE"])
            torch.set_rng_state(snap["RNG"])

    def wrap(self) -> None:
        self.model = DDP(self.model)
        if self.attach:
            import ddp_profile

            ddp_profile.attach(self.model, self.optimizer, loss_fn=lambda m, b: F.cross_entropy(m(b[0]), b[1]))

    def _run_batch(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        b_sz = len(next(iter(self.loader))[0])  # as the tutorial does: a peek whose batch is never trained on
        if self.rank == 0:
            print("epoch %d: batch size %d, %d steps" % (epoch, b_sz, len(self.loader)), flush=True)
        if self.plant != "no-set-epoch":
            self.loader.sampler.set_epoch(epoch)
        total = 0.0
        for x, y in self.loader:
            total += self._run_batch(x, y)
        if self.rank == 0:
            print("epoch %d: mean loss %.4f" % (epoch, total / len(self.loader)), flush=True)

    def _save_snapshot(self, epoch: int) -> None:
        if self.plant == "safetensors-weights":
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in self.model.module.state_dict().items()}, self.snapshot)
            return
        snap = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
        if self.plant != "tutorial-snapshot":
            snap.update(OPTIMIZER_STATE=self.optimizer.state_dict(), RNG=torch.get_rng_state())
        torch.save(snap, self.snapshot)

    def train(self, epochs: int) -> None:
        for epoch in range(self.epochs_run, epochs):
            self._run_epoch(epoch)
            if self.rank == 0:
                self._save_snapshot(epoch)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--snapshot", default="snapshot.pt")
    p.add_argument("--resume", default="")
    p.add_argument("--plant", default="")
    p.add_argument("--attach", action="store_true")
    a = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = dataset()
    loader = DataLoader(data, batch_size=a.batch_size, shuffle=False, sampler=DistributedSampler(data))
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    t = Trainer(model, loader, optimizer, a.snapshot, a.plant, a.attach)
    if a.resume:
        t.load(a.resume)
    t.wrap()
    t.train(a.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
