"""What recording a DataLoader worker's fetch costs the fetch itself (docs/benchmarks.md "Recording a user's data
path"): the same image-folder batches (tests/python/user_scripts/datapath_job.py's PNG files, PIL decode, a
torchvision Compose) fetched by a worker's fetcher, alone and with the companion's timing in place (fetch_spans.py:
the transform and collate wrappers, the split into spans, the 40-byte events and their writes), each batch both ways
in a row. Prints each round and the ratio of the medians. Target: within 1.02x.

    <venv>/bin/python bench/datapath_fetch_bench.py [--rounds 7] [--batches 128]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python", "user_scripts"))

import torch  # noqa: E402
from torch.utils.data._utils.collate import default_collate  # noqa: E402
from torch.utils.data._utils.fetch import _MapDatasetFetcher  # noqa: E402
from torchvision import datasets, transforms  # noqa: E402

import datapath_job  # noqa: E402
from ddp_profile import fetch_spans, worker_spans  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--batches", type=int, default=64)
ap.add_argument("--batch-size", type=int, default=8)
ap.add_argument("--image-size", type=int, default=96)
args = ap.parse_args()
torch.set_num_threads(1)
root = os.path.join(tempfile.gettempdir(), "ddp_profile_fetch_bench_%d" % args.image_size)
datapath_job.make_images(root, 256, args.image_size)
steps = transforms.Compose([transforms.RandomResizedCrop(32, scale=(0.5, 1.0)), transforms.RandomHorizontalFlip(),
                            transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
indices = [[(b * args.batch_size + i) % 256 for i in range(args.batch_size)] for b in range(args.batches)]


def fetch_ms() -> tuple:
    """Mean ms per batch (alone, recorded): each batch fetched twice in a row, once each way, the order alternating,
    so both see the same caches. Alone is the loader's own fetch with the transform wrappers idle (their idle cost,
    one attribute test per call, is counted as the loader's)."""
    ds = datasets.ImageFolder(root, transform=steps)
    f = _MapDatasetFetcher(ds, True, default_collate, False)
    alone = recorded = 0.0
    for k, b in enumerate(indices):
        for rec in ((True, False) if k % 2 else (False, True)):
            fetch_spans.in_progress.sink = worker.fetched if rec else None
            t = time.perf_counter()
            f.fetch(b)
            if rec:
                worker.handed_over(k)  # what the worker does at the batch's hand-over: spans made and written
            dt = time.perf_counter() - t
            if rec:
                recorded += dt
            else:
                alone += dt
    return alone * 1000 / len(indices), recorded * 1000 / len(indices)


run = tempfile.mkdtemp(prefix="datapath_fetch_bench_")
worker_spans.WorkerStart(None, run, 0, 0, 0)(0)  # the worker's set-up: the fetchers patched, its event log opened
worker = worker_spans._worker
times = {"alone": [], "recorded": []}
for r in range(args.rounds):
    a, c = fetch_ms()
    times["alone"].append(a)
    times["recorded"].append(c)
    print("round %d: alone %.3f ms/batch, recorded %.3f ms/batch" % (r + 1, a, c), flush=True)
ma, mr = statistics.median(times["alone"]), statistics.median(times["recorded"])
print("median of %d rounds: alone %.3f ms/batch, recorded %.3f ms/batch: %.3fx (target <= 1.02x)"
      % (args.rounds, ma, mr, mr / ma))
