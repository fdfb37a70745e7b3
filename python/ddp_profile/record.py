"""Record mode: every step's stages and gradient buckets (step_spans.py) and the loader's data path (loader_spans.py,
installed by ddp_profile.auto) into the rank's data-path events, on a clock shared with the other ranks by a
handshake (clock.py); and torch.profiler over one wait/warmup/active cycle, stepped after every optimizer step,
exported as <run>/rank<R>.pt.trace.json (the operator-level detail of a few steps: a Kineto trace with
distributedInfo when torch.distributed is initialised). The companion calls every mode's recorder at the same
moments (recorder.py)."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Optional

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from . import clock, events, fetch_spans, layout, loader_spans
from .recorder import Recorder
from .step_spans import StepSpans


class ProfileRecorder(Recorder):
    def __init__(self, comp: Any) -> None:
        cfg = comp.cfg
        self.path = os.path.join(cfg.run, layout.kineto_rank_trace_file(comp.rank))
        self.total = sum(cfg.schedule)
        self.steps = 0
        log = events.process_log(cfg.run, comp.rank)
        p0 = next(iter(comp.module.parameters()), None)
        device = p0.device if p0 is not None else torch.device("cpu")
        measured = clock.handshake(device if comp.backend == "nccl" else torch.device("cpu"))
        if measured is not None:
            log.set(**measured)
        self.spans = StepSpans(log, comp.model, device.type == "cuda")
        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        else:  # Kineto's "gpuGetDeviceCount failed" ERROR line on a CPU machine is not the user's error
            os.environ.setdefault("KINETO_LOG_LEVEL", "5")
        # One cycle (repeat=1): nothing is cleared that the trace would have kept.
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events at the end of each cycle")
        w, u, a = cfg.schedule
        self.prof: Optional[Any] = profile(activities=acts, schedule=schedule(wait=w, warmup=u, active=a, repeat=1),
                                           record_shapes=True, on_trace_ready=self._ready)
        self.prof.start()

    def _ready(self, prof: Any) -> None:
        prof.export_chrome_trace(self.path)

    def forward_pre(self, step: int, micro: int) -> None:
        ls = loader_spans.active()
        if ls is not None:
            ls.batch_taken()
        self.spans.forward_pre(step, micro)

    def forward_post(self, args: Any, kwargs: Any, out: Any) -> None:
        self.spans.forward_post()

    def before_update(self, step: int) -> None:
        self.spans.before_update(step)

    def after_step(self, step: int) -> None:
        self.spans.after_step(step)
        if self.prof is None:
            return
        self.prof.step()
        self.steps += 1
        if self.steps >= self.total:
            self._stop()

    def at_exit(self, failed: bool) -> None:
        log = events.process_log(self.spans.log.run, self.spans.log.rank)
        if fetch_spans.in_progress.steps:  # num_workers=0: the Compose steps this process ran
            log.set(transform_steps=dict(fetch_spans.in_progress.steps))
        log.flush()
        try:
            self._stop()
        except Exception as e:  # noqa: BLE001
            sys.stderr.write("ddp_profile: profiler stop failed: %s\n" % e)

    def _stop(self) -> None:
        p, self.prof = self.prof, None
        if p is not None:
            p.stop()
