"""Record mode: torch.profiler over one wait/warmup/active cycle, stepped after every optimizer step, exported as
<run>/rank<R>.pt.trace.json (a Kineto trace with distributedInfo when torch.distributed is initialised)."""
from __future__ import annotations

import os
from typing import Any, Optional, Tuple

import torch

from . import layout


class Recorder:
    def __init__(self, run: str, rank: int, sched: Tuple[int, int, int]) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        self.path = os.path.join(run, layout.kineto_rank_trace_file(rank))
        self.total = sum(sched)
        self.steps = 0
        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        w, u, a = sched
        self.prof: Optional[Any] = profile(activities=acts, schedule=schedule(wait=w, warmup=u, active=a, repeat=1),
                                           record_shapes=True, on_trace_ready=self._ready)
        self.prof.start()

    def _ready(self, prof: Any) -> None:
        prof.export_chrome_trace(self.path)

    def step(self) -> None:
        if self.prof is None:
            return
        self.prof.step()
        self.steps += 1
        if self.steps >= self.total:
            self.stop()

    def stop(self) -> None:
        p, self.prof = self.prof, None
        if p is not None:
            p.stop()
