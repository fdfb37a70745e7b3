"""Record mode: torch.profiler over one wait/warmup/active cycle, stepped after every optimizer step, exported as
<run>/rank<R>.pt.trace.json (a Kineto trace with distributedInfo when torch.distributed is initialised). The
companion calls every mode's recorder at the same moments (recorder.py); this one needs only the steps and the end."""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from . import layout
from .recorder import Recorder


class ProfileRecorder(Recorder):
    def __init__(self, comp: Any) -> None:
        cfg = comp.cfg
        self.path = os.path.join(cfg.run, layout.kineto_rank_trace_file(comp.rank))
        self.total = sum(cfg.schedule)
        self.steps = 0
        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        w, u, a = cfg.schedule
        self.prof: Optional[Any] = profile(activities=acts, schedule=schedule(wait=w, warmup=u, active=a, repeat=1),
                                           record_shapes=True, on_trace_ready=self._ready)
        self.prof.start()

    def _ready(self, prof: Any) -> None:
        prof.export_chrome_trace(self.path)

    def after_step(self, step: int) -> None:
        if self.prof is None:
            return
        self.prof.step()
        self.steps += 1
        if self.steps >= self.total:
            self._stop()

    def at_exit(self, failed: bool) -> None:
        try:
            self._stop()
        except Exception as e:  # noqa: BLE001
            sys.stderr.write("ddp_profile: profiler stop failed: %s\n" % e)

    def _stop(self) -> None:
        p, self.prof = self.prof, None
        if p is not None:
            p.stop()
