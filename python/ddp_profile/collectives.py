"""Counting DDP's gradient-bucket allreduces: a DDP comm hook that counts each bucket, then hands it to the stock
allreduce_hook (numerically identical to DDP's built-in reduction). One line per micro-step (per backward)."""
from __future__ import annotations

from typing import Any, Optional


from . import files


class Collectives:
    def __init__(self, model: Any, out: files.Jsonl) -> None:
        self.model, self.out = model, out
        self.count, self.bytes = 0, 0
        self.hooked = False
        self.pending: Optional[tuple] = None  # (step, micro, sync_flag) of the last forward
        try:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            from torch.nn.parallel import DistributedDataParallel as DDP

            if isinstance(model, DDP):
                def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects other annotations
                    self.count += 1
                    buf = bucket.buffer()
                    self.bytes += buf.numel() * buf.element_size()
                    return default_hooks.allreduce_hook(state, bucket)

                model.register_comm_hook(None, hook)
                self.hooked = True
        except Exception:  # the user registered a hook already, or an older DDP
            self.hooked = False

    def forward(self, step: int, micro: int) -> None:
        self.flush()
        self.pending = (step, micro, getattr(self.model, "require_backward_grad_sync", None))

    def flush(self) -> None:
        """The last micro-step's line: at the next forward or at the optimizer step."""
        if self.pending is None:
            return
        step, micro, sync = self.pending
        line = {"step": step, "micro": micro, "sync_flag": sync}
        if self.hooked:
            line.update(collectives=self.count, bytes=self.bytes)
        else:
            line["collectives"] = None
        self.out.write(line)
        self.pending, self.count, self.bytes = None, 0, 0
