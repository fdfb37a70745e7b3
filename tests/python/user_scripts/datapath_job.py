"""An image-classification DDP script with no ddp_profile line, in the usual shape: torchvision's ImageFolder over a
folder of PNG files (made on first use), PIL decode, a torchvision Compose of transforms, a DistributedSampler and a
DataLoader with worker processes; a small CNN on the CPU with Gloo. The data-path tests (test_user_datapath.cpp)
plant one fault at a time and expect `ddp_profile --record` to name it at its stage, rank and worker:

--slow-transform R:MS   rank R's transform pipeline has a costly extra step (MS ms per image)
--slow-read R:MS        rank R reads its files from slow storage (MS ms per file, before the decode)
--burst R:N:MS          rank R's every N-th file read in a worker waits MS ms more (a shard fetched, a cold cache)
--workers N             DataLoader workers (0: the main process loads)
--prefetch K            batches each worker keeps in flight (DataLoader's prefetch_factor; its default when absent)
--no-persistent         workers end with each epoch and start again with the next
--worker-start S        each worker's worker_init_fn takes S seconds (an expensive per-worker setup)
--image-size PX         the images' side (bigger: a costlier decode)
--width C               the CNN's channels (bigger: more compute a batch)
--report                rank 0 prints {"mean_step_ms": ...} over the steps after the first (bench/datapath_bench.py)
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def make_images(root: str, n: int, size: int) -> None:
    """n PNG files in 4 class folders, written once (rank 0; the others wait at the barrier)."""
    done = os.path.join(root, ".complete")
    if os.path.exists(done):
        return
    g = torch.Generator().manual_seed(3)
    for i in range(n):
        d = os.path.join(root, "class%d" % (i % 4))
        os.makedirs(d, exist_ok=True)
        px = (torch.rand(size, size, 3, generator=g) * 255).to(torch.uint8).numpy()
        Image.fromarray(px).save(os.path.join(d, "img%04d.png" % i))
    open(done, "w").close()


def parse_rank_ms(spec: str) -> tuple:
    if not spec:
        return (-1, 0.0)
    r, ms = spec.split(":")
    return (int(r), float(ms))


class Sleep:
    """A transform step that costs `ms` of CPU-bound time per image."""

    def __init__(self, ms: float) -> None:
        self.s = ms / 1000.0

    def __call__(self, img):  # type: ignore[no-untyped-def]
        end = time.perf_counter() + self.s
        while time.perf_counter() < end:
            pass
        return img


def slow_loader(ms: float):  # type: ignore[no-untyped-def]
    def load(path: str):  # type: ignore[no-untyped-def]
        time.sleep(ms / 1000.0)  # the storage's latency
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    return load


def bursty_loader(every: int, ms: float):  # type: ignore[no-untyped-def]
    reads = [0]  # per process: each worker counts its own reads

    def load(path: str):  # type: ignore[no-untyped-def]
        reads[0] += 1
        if reads[0] % every == 0:
            time.sleep(ms / 1000.0)  # now and then a read pays for a whole shard
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    return load


def slow_start(s: float):  # type: ignore[no-untyped-def]
    def init(worker_id: int) -> None:
        time.sleep(s)
    return init


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "ddp_profile_images"))
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--image-size", type=int, default=48)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-persistent", action="store_true")
    p.add_argument("--worker-start", type=float, default=0.0)
    p.add_argument("--slow-transform", default="")
    p.add_argument("--slow-read", default="")
    p.add_argument("--burst", default="")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--prefetch", type=int, default=0)
    p.add_argument("--report", action="store_true")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    root = "%s_%d_%d" % (a.data, a.images, a.image_size)
    if rank == 0:
        make_images(root, a.images, a.image_size)
    dist.barrier()

    steps = [transforms.RandomResizedCrop(32, scale=(0.5, 1.0)), transforms.RandomHorizontalFlip(),
             transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))]
    slow_rank, slow_ms = parse_rank_ms(a.slow_transform)
    if rank == slow_rank:
        steps.insert(2, Sleep(slow_ms))
    read_rank, read_ms = parse_rank_ms(a.slow_read)
    kw = {"loader": slow_loader(read_ms)} if rank == read_rank else {}
    if a.burst and int(a.burst.split(":")[0]) == rank:
        _, every, ms = a.burst.split(":")
        kw = {"loader": bursty_loader(int(every), float(ms))}
    ds = datasets.ImageFolder(root, transform=transforms.Compose(steps), **kw)
    sampler = DistributedSampler(ds, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers,
                        persistent_workers=a.workers > 0 and not a.no_persistent,
                        worker_init_fn=slow_start(a.worker_start) if a.worker_start > 0 else None,
                        **({"prefetch_factor": a.prefetch} if a.prefetch > 0 else {}))

    c = a.width
    model = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(2 * c, 4))
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    steps_ms = []
    t = time.perf_counter()
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            now = time.perf_counter()
            steps_ms.append((now - t) * 1000)
            t = now
    if a.report and rank == 0:
        print(json.dumps({"mean_step_ms": sum(steps_ms[1:]) / max(len(steps_ms) - 1, 1), "steps": len(steps_ms)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
