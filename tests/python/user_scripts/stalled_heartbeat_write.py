"""A small DDP job whose rank, at optimizer step 5, leaves its heartbeat's time half-written (zeros) for 0.3 s, as a
rank descheduled in the middle of writing it does on a loaded machine; then it goes on and ends normally. The
supervisor must not call that a hang (it once did: "rank 0 hung ... no progress for 120 s", 70 s into a job).
Offsets: python/ddp_profile/layout.py (last_ns, an int64 at byte 32)."""
import mmap
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddp_profile

torch.set_num_threads(1)
dist.init_process_group("gloo")
g = torch.Generator().manual_seed(1234)
x_all = torch.randn(1024, 16, generator=g)
y_all = (x_all.sum(1) > 0).long()
dataset = TensorDataset(x_all, y_all)
sampler = DistributedSampler(dataset, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
dp = ddp_profile.attach(model, optimizer, loss_fn=lambda m, b: criterion(m(b[0]), b[1]), sampler=sampler)
sampler.set_epoch(0)
for step, (x, y) in enumerate(dp.loader(loader)):
    criterion(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step == 5:
        with open(dp.hb.path, "r+b") as f:
            beat = mmap.mmap(f.fileno(), 0)
            beat[32:40] = bytes(8)
            time.sleep(0.3)  # the companion's next write puts a time there again
            beat.close()
dist.destroy_process_group()
