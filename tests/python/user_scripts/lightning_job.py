"""A PyTorch Lightning script with no ddp_profile line: a LightningModule (training_step, configure_optimizers with
a StepLR scheduler), Trainer(accelerator="cpu", devices=2, strategy="ddp") with Lightning's own DistributedSampler,
ModelCheckpoint after every epoch, and resume through trainer.fit(ckpt_path=...). Launched by torchrun, or by
`python lightning_job.py`, where Lightning starts the second rank itself.

--plant no-distributed-sampler: Trainer(use_distributed_sampler=False) with a plain shuffling loader: every rank
  trains on the whole dataset in its own order: data.shard_rule fails.
--plant accumulate: accumulate_grad_batches=2 (a correct job: comm.no_sync passes with two micro-steps a step).
--model lm: a small language model instead, its output head tied to its token embedding (one parameter under two
  names, as tie_word_embeddings makes most language models): a correct job."""
import argparse

import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset


def dataset(n: int = 512, features: int = 20, classes: int = 4) -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    return TensorDataset(x, (x @ w).argmax(1))


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)}


def tokens(n: int = 512, vocab: int = 64, length: int = 12) -> TensorDataset:
    ids = torch.randint(0, vocab, (n, length), generator=torch.Generator().manual_seed(5))
    return TensorDataset(ids[:, :-1], ids[:, 1:])


class TiedLm(pl.LightningModule):
    def __init__(self, vocab: int = 64, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Sequential(nn.Linear(width, 64), nn.GELU(), nn.Linear(64, width))
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        h = self.embed(x)
        logits = self.head(h + self.mix(h))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--ckpt-dir", default="lightning_ckpts")
    p.add_argument("--resume", default=None)
    p.add_argument("--plant", default="")
    p.add_argument("--model", choices=["classifier", "lm"], default="classifier")
    a = p.parse_args()
    pl.seed_everything(0, workers=True)
    plain = a.plant == "no-distributed-sampler"
    lm = a.model == "lm"
    loader = DataLoader(tokens() if lm else dataset(), batch_size=16, shuffle=True)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=a.epochs, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=not plain,
                         accumulate_grad_batches=2 if a.plant == "accumulate" else 1,
                         callbacks=[ModelCheckpoint(dirpath=a.ckpt_dir, every_n_epochs=1, save_top_k=-1)])
    trainer.fit(TiedLm() if lm else Classifier(), loader, ckpt_path=a.resume)


if __name__ == "__main__":
    main()
