"""The small DDP job the planted-fault scripts beside this file share: 1024 x 16 samples, an MLP 16-32-2, SGD, a
DistributedSampler, gloo, the companion attached. Imported from the scripts' own folder (Python puts it on sys.path)."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddp_profile


def attach_small_job():
    """(dp, loader, sampler, model, optimizer, criterion), with the process group initialised."""
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
    return dp, loader, sampler, model, optimizer, criterion
