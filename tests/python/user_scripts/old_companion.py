"""A small DDP job whose companion writes the heartbeat format of an older ddp_profile (0: before the record had a
version), as a stale `pip install` of the companion would. ddp_profile must refuse the job, naming both formats,
rather than misread its records. Offsets: python/ddp_profile/layout.py (format_version, an int32 at byte 44)."""
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
with open(dp.hb.path, "r+b") as f:
    beat = mmap.mmap(f.fileno(), 0)
    beat[44:48] = bytes(4)
    beat.close()
for epoch in range(100):  # long enough that only the refusal ends it
    sampler.set_epoch(epoch)
    for x, y in dp.loader(loader):
        criterion(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        time.sleep(0.01)
dist.destroy_process_group()
