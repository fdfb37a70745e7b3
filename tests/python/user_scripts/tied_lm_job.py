"""A small language model whose output head is its token embedding (tied weights, as tie_word_embeddings makes most
language models), trained in plain PyTorch under torchrun with gloo, no ddp_profile line: an embedding, a
position-wise MLP, the head sharing the embedding's weight; AdamW; a DistributedSampler; a checkpoint every 8 steps
written as save_pretrained writes one: the tied weight stored once, under the embedding's name.

--attach: the README's one line for the single-process reference, `ddp_profile.attach(model, optimizer,
loss_fn=...)`, after DDP(...).

    torchrun --nproc-per-node 2 tied_lm_job.py --ckpt PATH [--resume PATH] [--epochs N] [--attach]
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

VOCAB, WIDTH, LENGTH = 64, 32, 12


class TinyLm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.mix = nn.Sequential(nn.Linear(WIDTH, 64), nn.GELU(), nn.Linear(64, WIDTH))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied: one parameter, two names

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        return self.head(h + self.mix(h))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--attach", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, VOCAB, (512, LENGTH), generator=g)
    data = TensorDataset(ids[:, :-1], ids[:, 1:])
    sampler = DistributedSampler(data, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    torch.manual_seed(0)
    model = DDP(TinyLm())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    if a.attach:
        import ddp_profile

        ddp_profile.attach(model, optimizer, loss_fn=lambda m, b: F.cross_entropy(m(b[0]).reshape(-1, VOCAB),
                                                                                b[1].reshape(-1)))
    step, start_epoch = 0, 0
    if a.resume:
        state = torch.load(a.resume, weights_only=True)
        model.module.load_state_dict(state["model"], strict=False)  # the head's name is absent: it is the embedding
        optimizer.load_state_dict(state["optimizer"])
        step, start_epoch = state["step"], state["epoch"] + 1
        torch.set_rng_state(state["rng"])
    for epoch in range(start_epoch, a.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
        if dist.get_rank() == 0:  # at each epoch's end, the tied weight once, as save_pretrained stores it
            weights = {k: v for k, v in model.module.state_dict().items() if k != "head.weight"}
            torch.save({"model": weights, "optimizer": optimizer.state_dict(), "step": step, "epoch": epoch,
                        "rng": torch.get_rng_state()}, a.ckpt)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
