"""Resumes ddp_profile's step-K checkpoint in PyTorch's own DDP and checks it lands where ddp_profile did.

Run under torchrun (2 gloo ranks), or as 2 processes with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set:
  torchrun --nproc-per-node 2 resume_ddp_checkpoint.py --data DATA.ddpd --ckpt RUN/checkpoints/stepK
           --steps N --expect RUN/checkpoints/stepN [--batch-size 64 --lr 1e-3 --seed 0 --accum 1]

The job is the seed's: MLP F-512-C (module names fc1/relu/fc2, as ddp_profile's), AdamW, mean cross-entropy,
DistributedSampler(shuffle, seed, drop_last) + DataLoader(batch, drop_last), the .ddpd file's normalisation
(x - mean) / std; with --accum K, K micro-batches a step, each loss divided by K, the first K-1 backwards inside
ddp.no_sync() (an epoch's batches cut to a multiple of K), as ddp_profile's --accum-steps. Every rank loads its own checkpoint file with torch.load(weights_only=True) — model and optimizer
(optimizer.load_state_dict: PyTorch's layout) — trains from step K to N, and compares its parameters bitwise with
ddp_profile's step-N checkpoint. Exit 0 when equal (or within --atol: another PyTorch version's kernels round
differently); 1 naming the first parameter that differs.

--stepwise (needs our checkpoints at every step from K to N): before the free run, every step t in (K, N] starts from
our step t-1 (parameters and optimizer state) and is compared with our step t, so that a difference never carries
over and each one has a bound derived from the arithmetic, which holds on every machine:
  1. the gradient (forward, backward, the allreduce's average): |g_python - g_ours| <= n u max|g| per tensor, with u
     float32's unit roundoff and n the longest sum in the model (features, hidden, batch x world); ours is read from
     our optimizer's first moment, g = (m_t - beta1 m_t-1) / (1 - beta1);
  2. our optimizer is AdamW: our step-t parameters are step t-1's moved by AdamW with our own step-t moments, within
     rounding (8 u of |theta| + lr |direction|), and our second moment is beta2 v_t-1 + (1 - beta2) g_ours^2;
  3. the parameters: |theta_python - theta_ours| <= lr |d_python - d_ours| + rounding, d = m^/(sqrt(v^) + eps) from
     each side's moments: Adam divides by sqrt(v) + eps, which turns a gradient's last-bit difference into a step of
     up to lr where |g| is near eps.
It prints, per step, whether the gradients and the parameters are bitwise equal and how far apart they are against
their bounds. With --expect-bitwise every comparison must be bitwise when the first step's gradients are (the same
kernels on this machine); when they are not, the bounds hold and the free run is reported, not judged.
"""
import argparse
import contextlib
import os
import struct
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HEADER = struct.Struct("<8sIIQQQII4I")


class Ddpd(Dataset):
    """A .ddpd file (docs/data-format.md), normalised as ddp_profile's loader does."""

    def __init__(self, path):
        raw = open(path, "rb").read()
        magic, version, f, n, rec_off, stats_off, *_ = HEADER.unpack_from(raw)
        assert magic == b"DDPDATA1" and version in (1, 2), path
        stats = np.frombuffer(raw, "<f4", 2 * f, stats_off)
        mean, std = stats[:f], np.where(stats[f:] > 0, stats[f:], 1).astype("<f4")
        recs = np.frombuffer(raw, np.dtype([("x", "<f4", (f,)), ("y", "<i4")]), n, rec_off)
        self.x = torch.from_numpy(((recs["x"] - mean) / std).astype("<f4"))
        self.y = torch.from_numpy(recs["y"].astype(np.int64))
        self.features = f

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def load(path):
    # torch 1.13's weights-only unpickler did not take floats yet (its opcode BINFLOAT): only torch >= 2 loads our
    # checkpoints weights-only, as users should; 1.13 (Debian's, the LibTorch we build on) checks the numbers.
    weights_only = int(torch.__version__.split(".")[0]) >= 2
    return torch.load(path, weights_only=weights_only)


U = 2.0 ** -24  # float32's unit roundoff


class Job:
    """The seed's model, optimizer and data, started from one of our checkpoints."""

    def __init__(self, args, data, ckpt_dir, rank, world):
        ckpt = load(os.path.join(ckpt_dir, f"rank{rank}.pt"))
        self.model = nn.Sequential(OrderedDict(fc1=nn.Linear(data.features, args.hidden), relu=nn.ReLU(),
                                               fc2=nn.Linear(args.hidden, args.classes)))
        self.model.load_state_dict(ckpt["model"])
        self.ddp = DDP(self.model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.opt.load_state_dict(ckpt["optimizer"])
        progress = ckpt["progress"]
        self.step, self.epoch = int(progress["global_step"]), int(progress["epoch"])
        self.skip = int(progress["batches_in_epoch"])
        self.sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                          drop_last=True)
        self.loader = DataLoader(data, batch_size=args.batch_size, sampler=self.sampler, drop_last=True, num_workers=0)
        self.k = args.accum
        self.grads = None  # each parameter's synced gradient of the last optimizer step

    def train(self, to_step):
        loss_fn = nn.CrossEntropyLoss()
        k = self.k
        while self.step < to_step:
            self.sampler.set_epoch(self.epoch)
            usable = len(self.loader) // k * k
            for i, (x, y) in enumerate(self.loader):
                if i < self.skip:
                    continue
                if self.step >= to_step or i >= usable:
                    break
                micro = i % k
                if micro == 0:
                    self.opt.zero_grad()
                with self.ddp.no_sync() if micro < k - 1 else contextlib.nullcontext():
                    loss = loss_fn(self.ddp(x), y)
                    (loss / k if k > 1 else loss).backward()
                if micro == k - 1:
                    self.grads = [p.grad.detach().clone() for p in self.model.parameters()]
                    self.opt.step()
                    self.step += 1
            self.epoch, self.skip = self.epoch + 1, 0


def direction(state, group):
    """AdamW's step direction m^/(sqrt(v^) + eps) from one side's moments, in float64."""
    b1, b2 = group["betas"]
    t = float(state["step"])
    m, v = state["exp_avg"].double(), state["exp_avg_sq"].double()
    return (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + group["eps"])


def compare_step(job, before, after, n_longest):
    """Step t from our t-1 (job has trained it) against our step t. Returns (problems, bitwise grads, bitwise params)."""
    group = before["optimizer"]["param_groups"][0]
    b1, b2 = group["betas"]
    lr, wd = group["lr"], group["weight_decay"]
    ours_state, ours_prev = after["optimizer"]["state"], before["optimizer"]["state"]
    py_state = job.opt.state_dict()["state"]
    problems, grads_equal, params_equal, worst = [], True, True, {"g": 0.0, "p": 0.0}
    for j, (name, p) in enumerate(job.model.named_parameters()):
        theta0 = before["model"][name].double()
        theta_ours = after["model"][name].double()
        m_prev = ours_prev[j]["exp_avg"].double() if j in ours_prev else torch.zeros_like(theta0)
        v_prev = ours_prev[j]["exp_avg_sq"].double() if j in ours_prev else torch.zeros_like(theta0)
        m, v = ours_state[j]["exp_avg"].double(), ours_state[j]["exp_avg_sq"].double()
        # 1. the gradient
        g_py = job.grads[j].double()
        g_ours = (m - b1 * m_prev) / (1 - b1)
        g_gap = (g_py - g_ours).abs().max().item()
        recon = 4 * U * (m.abs().max().item() + b1 * m_prev.abs().max().item()) / (1 - b1)
        g_bound = n_longest * U * g_py.abs().max().item() + recon
        # Equal first moments from an equal start are equal gradients (the float64 reconstruction is not exact).
        grads_equal &= torch.equal(py_state[j]["exp_avg"], ours_state[j]["exp_avg"])
        if g_gap > g_bound:
            problems.append(f"{name}'s gradient differs from ours by {g_gap:.3g} (bound {g_bound:.3g}: rounding of "
                            f"sums of {n_longest} terms): not rounding")
        # 2. our optimizer is AdamW
        d_ours = direction(ours_state[j], group)
        expect = theta0 * (1 - lr * wd) - lr * d_ours
        own_gap = (theta_ours - expect).abs() - 8 * U * (theta0.abs() + lr * d_ours.abs())
        if own_gap.max().item() > 0:
            problems.append(f"{name}: our step is not AdamW's from our own moments (off by "
                            f"{(theta_ours - expect).abs().max().item():.3g})")
        v_expect = b2 * v_prev + (1 - b2) * g_ours * g_ours
        if ((v - v_expect).abs() - 8 * U * (v.abs() + v_expect.abs())).max().item() > 0:
            problems.append(f"{name}: our second moment is not beta2 v + (1 - beta2) g^2")
        # 3. the parameters
        d_py = direction(py_state[j], group)
        p_gap = (p.detach().double() - theta_ours).abs()
        p_bound = lr * (d_py - d_ours).abs() + 8 * U * (theta0.abs() + lr * d_py.abs())
        params_equal &= torch.equal(p.detach(), after["model"][name])
        if (p_gap - p_bound).max().item() > 0:
            problems.append(f"{name}: parameters {p_gap.max().item():.3g} apart, more than AdamW's step from the two "
                            f"gradients explains")
        worst["g"], worst["p"] = max(worst["g"], g_gap), max(worst["p"], p_gap.max().item())
    return problems, grads_equal, params_equal, worst


def stepwise(args, data, rank, world):
    """Each step from our previous one; returns (problems, whether the first step's gradients were bitwise equal)."""
    n_longest = max(data.features, args.hidden, args.batch_size * world)
    problems, first_grads_equal = [], None
    for t in range(args.from_step + 1, args.steps + 1):
        before_dir = os.path.join(os.path.dirname(args.ckpt), f"step{t - 1}")
        job = Job(args, data, before_dir, rank, world)
        job.train(t)
        # Read again: torch 2.x's AdamW.load_state_dict keeps the loaded tensors and steps them in place.
        before = load(os.path.join(before_dir, f"rank{rank}.pt"))
        after = load(os.path.join(os.path.dirname(args.ckpt), f"step{t}", f"rank{rank}.pt"))
        found, g_eq, p_eq, worst = compare_step(job, before, after, n_longest)
        if first_grads_equal is None:
            first_grads_equal = g_eq
        print(f"rank {rank}: step {t} from our step {t - 1}: gradients "
              f"{'bitwise equal' if g_eq else 'within %.3g' % worst['g']}, parameters "
              f"{'bitwise equal' if p_eq else 'within %.3g' % worst['p']} (each within its bound: "
              f"{'no' if found else 'yes'})")
        problems += [f"step {t}: {x}" for x in found]
    return problems, first_grads_equal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--atol", type=float, default=0.0, help="0: bitwise equal")
    ap.add_argument("--stepwise", action="store_true", help="each step from ours, against a derived bound")
    ap.add_argument("--expect-bitwise", action="store_true",
                    help="with --stepwise: bitwise everywhere when the first step's gradients are")
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    data = Ddpd(args.data)
    atol = args.atol
    if args.stepwise:
        args.from_step = int(load(os.path.join(args.ckpt, f"rank{rank}.pt"))["progress"]["global_step"])
        problems, kernels_agree = stepwise(args, data, rank, world)
        for p in problems:
            print(f"rank {rank}: {p}")
        if problems:
            sys.exit(1)
        if not args.expect_bitwise:
            atol = float("inf")
        elif not kernels_agree:
            print(f"rank {rank}: the first step's gradients differ from ours in the last bits: this machine's kernels "
                  f"round otherwise than ours; the free run is reported, not judged bitwise")
            atol = float("inf")

    job = Job(args, data, args.ckpt, rank, world)
    job.train(args.steps)
    expect = load(os.path.join(args.expect, f"rank{rank}.pt"))["model"]
    worst = 0.0
    for name, p in job.model.state_dict().items():
        diff = (p - expect[name]).abs().max().item()
        if not torch.equal(p, expect[name]) and not diff <= atol:
            print(f"rank {rank}: {name} differs from ddp_profile's step {args.steps} (max |diff| {diff:.3g})")
            sys.exit(1)
        worst = max(worst, diff)
    how = "bitwise equal to" if worst == 0 else f"within {worst:.3g} of"
    print(f"rank {rank}: step {args.steps} parameters {how} ddp_profile's (torch {torch.__version__})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
