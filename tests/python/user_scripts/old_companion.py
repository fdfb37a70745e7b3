"""A small DDP job whose companion writes the heartbeat format of an older ddp_profile (0: before the record had a
version), as a stale `pip install` of the companion would. ddp_profile must refuse the job, naming both formats,
rather than misread its records. Offsets: python/ddp_profile/layout.py (format_version, an int32 at byte 44)."""
import mmap
import time

import torch.distributed as dist

from small_job import attach_small_job

dp, loader, sampler, model, optimizer, criterion = attach_small_job()
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
