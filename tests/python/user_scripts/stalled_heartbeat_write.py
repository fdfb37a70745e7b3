"""A small DDP job whose rank, at optimizer step 5, leaves its heartbeat's time half-written (zeros) for 0.3 s, as a
rank descheduled in the middle of writing it does on a loaded machine; then it goes on and ends normally. The
supervisor must not call that a hang (it once did: "rank 0 hung ... no progress for 120 s", 70 s into a job).
Offsets: python/ddp_profile/layout.py (last_ns, an int64 at byte 32)."""
import mmap
import time

import torch.distributed as dist

from small_job import attach_small_job

dp, loader, sampler, model, optimizer, criterion = attach_small_job()
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
