"""The training process's stages under --record, every step, from the companion's moments (record.py calls in):
forward (the DDP model's forward), backward (from the forward's end to the last gradient bucket's launch), wait_comm
(from that launch until the last bucket's allreduce completed), optimizer (the update), step (one optimizer step,
from the previous one's end), each gradient bucket's allreduce on the `comm` lane with its bytes (a comm hook doing
what DDP's stock allreduce_hook does, so the numerics are DDP's own), and the resident set (and CUDA
memory) after each step as counters. The batch's copy to the GPU (`h2d`) is timed where the batch's tensors are
moved between its fetch and the forward taking it. The training thread's stages are timed by moments
(thread_cpu.moment): each carries its CPU split when both its ends were taken on one thread (the allreduce, launched
and completed on different threads, and wait_comm, which ends at a completion, carry none)."""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, List, Optional, Tuple

import torch

from . import events, thread_cpu
from .thread_cpu import Moment

_now = time.monotonic_ns
_moment = thread_cpu.moment


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# /proc/self/statm opened once per process (it names the process that opened it): a pread per step, not an open,
# a read and a close
_statm: Optional[Tuple[int, int]] = None  # (pid, fd)


def _rss_bytes() -> int:
    global _statm
    try:
        if _statm is None or _statm[0] != os.getpid():
            _statm = (os.getpid(), os.open("/proc/self/statm", os.O_RDONLY))
        return int(os.pread(_statm[1], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class StepSpans:
    def __init__(self, log: events.EventLog, model: Any, cuda: bool) -> None:
        self.log, self.cuda = log, cuda
        self.main, self.comm = log.lane("main"), log.lane("comm")
        self.step, self.micro = 0, 0
        self.t_step = _moment()
        self.t_fwd: Optional[Moment] = None
        self.t_fwd_end: Optional[Moment] = None
        self.t_update: Optional[Moment] = None
        self.lock = threading.Lock()
        # (launch, done) of this micro-step's buckets; done 0 while running
        self.buckets: List[Tuple[Moment, int]] = []
        self.hooked = self._hook(model)

    def _hook(self, model: Any) -> bool:
        """The buckets' allreduce as DDP's stock allreduce_hook does it (divide by the world, then sum), with its one
        completion callback also noting when the bucket was done: a second Python callback per bucket cost ~1 ms a
        step on Gloo here."""
        try:
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            if not isinstance(model, DDP):
                return False

            def hook(group, bucket):  # type: ignore[no-untyped-def]  # DDP rejects other annotations
                g = group if group is not None else dist.group.WORLD
                buf = bucket.buffer()
                nbytes, index, step, micro = buf.numel() * buf.element_size(), bucket.index(), self.step, self.micro
                launch = _moment()
                t0 = launch.t
                with self.lock:
                    slot = len(self.buckets)
                    self.buckets.append((launch, 0))
                buf.div_(g.size())

                def done(fut):  # type: ignore[no-untyped-def]
                    t1 = _now()
                    with self.lock:
                        if slot < len(self.buckets):
                            self.buckets[slot] = (launch, t1)
                    self.log.span("allreduce", self.comm, t0, t1, step=step, micro=micro, bucket=index, value=nbytes)
                    return fut.value()[0]

                return dist.all_reduce(buf, group=g, async_op=True).get_future().then(done)

            model.register_comm_hook(None, hook)
            return True
        except Exception:  # noqa: BLE001  (the job's own comm hook: its buckets are not recorded)
            return False

    def _span(self, stage: str, a: Moment, b: Moment, **fields: Any) -> None:
        self.log.span(stage, self.main, a.t, b.t, cpu=thread_cpu.split(a, b), **fields)

    def forward_pre(self, step: int, micro: int) -> None:
        now = _moment()
        self._end_backward(now)
        self.step, self.micro, self.t_fwd = step, micro, now

    def forward_post(self) -> None:
        now = _moment()
        if self.t_fwd is not None:
            self._span("forward", self.t_fwd, now, step=self.step, micro=self.micro)
        self.t_fwd, self.t_fwd_end = None, now

    def _end_backward(self, now: Moment) -> None:
        """The micro-step's backward ended by `now` (the next forward, or the update): it computed until its last
        bucket was launched and then waited for the allreduces still running."""
        if self.t_fwd_end is None:
            return
        with self.lock:
            buckets, self.buckets = self.buckets, []
        end = now
        if buckets:
            launch = max((b[0] for b in buckets), key=lambda m: m.t)
            done = max(b[1] for b in buckets)
            end = launch if launch.t < now.t else now
            if done > end.t:
                self.log.span("wait_comm", self.main, end.t, min(done, now.t), step=self.step, micro=self.micro)
        self._span("backward", self.t_fwd_end, end, step=self.step, micro=self.micro)
        self.t_fwd_end = None

    def before_update(self, step: int) -> None:
        now = _moment()
        self._end_backward(now)
        self.t_update = now

    def after_step(self, step: int) -> None:
        moment = _moment()
        now = moment.t
        if self.t_update is not None:
            self._span("optimizer", self.t_update, moment, step=step)
        self._span("step", self.t_step, moment, step=step)
        self.log.counter("host_rss_bytes", self.main, now, _rss_bytes(), step=step)
        if self.cuda:
            self.log.counter("cuda_allocated_bytes", self.main, now, torch.cuda.memory_allocated(), step=step)
            self.log.counter("cuda_reserved_bytes", self.main, now, torch.cuda.memory_reserved(), step=step)
        self.t_step, self.t_update = moment, None
        self.log.flush()


class H2D:
    """Tensor.to / Tensor.cuda, timed on the main lane when they move a tensor to another device between a batch's
    fetch and the training forward that takes it (the batch's copy; a model's own moves are outside that window)."""

    def __init__(self, log: events.EventLog) -> None:
        self.log, self.lane = log, log.lane("main")
        self.armed: Optional[Tuple[int, int, int]] = None  # (step, batch, pass) of the fetched batch
        for name in ("to", "cuda"):
            setattr(torch.Tensor, name, self._timed(getattr(torch.Tensor, name)))

    def _timed(self, original: Any) -> Any:
        @functools.wraps(original)
        def move(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            a = self.armed
            if a is None:
                return original(t, *args, **kwargs)
            m0 = _moment()
            out = original(t, *args, **kwargs)
            if isinstance(out, torch.Tensor) and out.device != t.device:  # a non_blocking copy: its enqueueing
                m1 = _moment()
                self.log.span("h2d", self.lane, m0.t, m1.t, step=a[0], item=a[1], epoch=a[2],
                              value=t.numel() * t.element_size(), cpu=thread_cpu.split(m0, m1))
            return out
        return move
