"""The data path of a user's DataLoader under --record, seen from the training process (ddp_profile.auto calls in at
every pass of a loader): each wait for a batch (`wait_data`) and the queue of batches ready when it asks
(`loader_queue_depth`); with num_workers=0 the fetch on the main lane, split as in a worker (fetch_spans.py); the
pin-memory thread's pin of each batch with its bytes; the batch's copy to the GPU (step_spans.H2D). A pass with
workers starts them under worker_spans.WorkerStart, which records each worker process.

A loader is numbered in the order its first pass starts; a pass is numbered per loader. Only the training loader is
kept (auto says which at the first training forward): the training process holds its events until then."""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, List, Optional, Tuple

import torch

from . import events, fetch_spans, thread_cpu
from .thread_cpu import Moment
from .step_spans import H2D
from .worker_spans import WorkerStart

_moment = thread_cpu.moment
_MAX_HELD = 1 << 16  # events held in the training process until the training loader is known


class Pass:
    """One pass over a loader, as the training process sees it."""

    def __init__(self, loader: int, number: int) -> None:
        self.loader, self.number = loader, number
        self.batch = 0


class LoaderSpans:
    def __init__(self, run: str, rank: int, steps: Callable[[], int]) -> None:
        self.run, self.rank, self.steps = run, rank, steps
        self.log = events.process_log(run, rank)
        self.main = self.log.lane("main")
        self.ordinals: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
        self.passes: List[int] = []
        self.train: Optional[int] = None
        self.held: List[Tuple[int, Callable[[], None]]] = []  # (loader, emit) until the training loader is known
        self.current: Optional[Pass] = None  # the pass whose batch the main thread is fetching (num_workers=0)
        self.pin_pass: Optional[Pass] = None
        self.lock = threading.Lock()
        self.h2d = H2D(self.log) if torch.cuda.is_available() else None
        fetch_spans.patch_fetchers()
        fetch_spans.in_progress.sink = self._fetched_here
        _patch_pin_thread(self)
        global _active
        _active = self

    def _emit(self, loader: int, emit: Callable[[], None]) -> None:
        with self.lock:
            if self.train is None:
                self.held.append((loader, emit))
                if len(self.held) > _MAX_HELD:  # a job that iterates loaders and never trains: keep the latest
                    del self.held[: len(self.held) - _MAX_HELD]
                return
        if loader == self.train:
            emit()

    def training_loader(self, loader: Any) -> None:
        """The loader the first trained batch came from: its held events are written, the others' dropped."""
        n = self.ordinals.get(loader)
        if n is None or self.train is not None:
            return
        with self.lock:
            self.train, held, self.held = n, self.held, []
        self.log.set(train_loader=n)
        for k, emit in held:
            if k == n:
                emit()

    def start_pass(self, loader: Any, start: Callable[[], Any]) -> Tuple[Any, Pass]:
        """`start()` creates the pass's iterator (and, with workers, starts them under WorkerStart)."""
        n = self.ordinals.setdefault(loader, len(self.ordinals))
        while len(self.passes) <= n:
            self.passes.append(0)
        p = Pass(n, self.passes[n])
        self.passes[n] += 1
        self.pin_pass = p
        if getattr(loader, "num_workers", 0) > 0 and not isinstance(loader.worker_init_fn, WorkerStart):
            user_fn = loader.worker_init_fn
            loader.worker_init_fn = WorkerStart(user_fn, self.run, self.rank, n, p.number)
            try:
                return start(), p
            finally:
                loader.worker_init_fn = user_fn
        return start(), p

    def next_batch(self, p: Pass, it: Any, fetch: Callable[[], Any]) -> Any:
        """The main thread's wait for batch `p.batch` of the pass; StopIteration passes through."""
        depth = _queue_depth(it)
        self.current = p
        m0 = _moment()
        try:
            batch = fetch()
        finally:
            self.current = None
        m1 = _moment()
        t0, t1 = m0.t, m1.t
        b, step, log, lane = p.batch, self.steps(), self.log, self.main
        p.batch += 1
        if self.h2d is not None and self.train in (None, p.loader):
            self.h2d.armed = (step, b, p.number)

        def emit() -> None:
            log.span("wait_data", lane, t0, t1, step=step, item=b, epoch=p.number, cpu=thread_cpu.split(m0, m1))
            if depth is not None:
                log.counter("loader_queue_depth", lane, t0, depth, step=step)
        self._emit(p.loader, emit)
        return batch

    def batch_taken(self) -> None:
        """A training forward took its batch: moves from now on are the model's, not the batch's copy."""
        if self.h2d is not None:
            self.h2d.armed = None

    def _fetched_here(self, start: Moment, end: Moment, parts: List[fetch_spans.Part]) -> None:
        """num_workers=0: the main thread fetched the batch itself."""
        p = self.current
        if p is None:
            return
        b, step, log, lane = p.batch, self.steps(), self.log, self.main
        self._emit(p.loader, lambda: fetch_spans.emit_fetch(log, lane, start, end, parts, b, p.number, step))

    def pinned(self, p: Pass, idx: int, start: Moment, end: Moment, nbytes: int) -> None:
        log = self.log
        lane = log.lane("pin")
        self._emit(p.loader, lambda: log.span("pin", lane, start.t, end.t, item=idx, epoch=p.number, value=nbytes,
                                              cpu=thread_cpu.split(start, end)))


_active: Optional[LoaderSpans] = None


def active() -> Optional[LoaderSpans]:
    return _active


def _queue_depth(it: Any) -> Optional[int]:
    q = getattr(it, "_data_queue", None)
    if q is None:
        return None
    try:
        return int(q.qsize())
    except (NotImplementedError, OSError):
        return None


def _tensor_bytes(data: Any) -> int:
    n, todo = 0, [data]
    while todo and len(todo) < 10000:
        v = todo.pop()
        if isinstance(v, torch.Tensor):
            n += v.numel() * v.element_size()
        elif isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
    return n


def _patch_pin_thread(spans: LoaderSpans) -> None:
    """The pin thread's loop reads its batches through a queue that remembers each one's index; the module's
    pin_memory, called by that loop, is timed on that thread."""
    from torch.utils.data._utils import pin_memory as pm

    if getattr(pm._pin_memory_loop, "_ddp_profile", False):
        return
    loop, pin = pm._pin_memory_loop, pm.pin_memory
    state = threading.local()

    class _Remembering:
        def __init__(self, q: Any, p: Pass) -> None:
            self.q, self.p, self.last = q, p, -1

        def get(self, *args: Any, **kwargs: Any) -> Any:
            r = self.q.get(*args, **kwargs)
            idx = r[0] if isinstance(r, tuple) and r and isinstance(r[0], int) else -1
            if 0 <= idx < self.last:  # a persistent pin thread's next pass starts its indices again
                self.p = Pass(self.p.loader, self.p.number + 1)
            self.last = idx
            state.idx, state.pass_ = idx, self.p
            return r

        def __getattr__(self, name: str) -> Any:
            return getattr(self.q, name)

    def recorded_loop(in_queue: Any, *args: Any, **kwargs: Any) -> None:
        p = spans.pin_pass or Pass(0, 0)
        return loop(_Remembering(in_queue, p), *args, **kwargs)

    def timed_pin(data: Any, *args: Any, **kwargs: Any) -> Any:
        idx = getattr(state, "idx", -1)
        if idx < 0:
            return pin(data, *args, **kwargs)
        m0 = _moment()
        out = pin(data, *args, **kwargs)
        spans.pinned(state.pass_, idx, m0, _moment(), _tensor_bytes(out))
        state.idx = -1
        return out

    recorded_loop._ddp_profile = True  # type: ignore[attr-defined]
    pm._pin_memory_loop = recorded_loop
    pm.pin_memory = timed_pin
