"""The data path of a user's DataLoader under --record, per worker, with no code change (ddp_profile.auto calls in):

- each worker process: per batch, its fetch split into `transform` (the dataset's transform / transforms /
  target_transform callables, wherever a Subset or ConcatDataset holds them), `collate` (the loader's collate_fn)
  and `disk_read` (the rest of the fetch: file reads, decoding, whatever is not a transform); its start-up
  (`worker_start`: from the pass creating the workers to the end of worker_init_fn). Each batch carries its send
  index (the batch's number in the pass) and the pass, taken where the worker hands the batch over.
- the pin-memory thread: each batch's pin, with its bytes.
- the training process: each wait for a batch (`wait_data`) and the queue of batches ready when it asks
  (`loader_queue_depth`); with num_workers=0 the fetch on the main lane, split as in a worker.

A loader is numbered in the order its first pass starts; a pass is numbered per loader. Only the training loader is
kept (auto says which at the first training forward): the training process holds its events until then."""
from __future__ import annotations

import multiprocessing.queues
import threading
import time
import weakref
from typing import Any, Callable, List, Optional, Tuple

import torch

from . import events
from .step_spans import H2D

_now = time.monotonic_ns
_TRANSFORM_ATTRS = ("transform", "transforms", "target_transform")
_MAX_HELD = 1 << 16  # events held in the training process until the training loader is known


# -- the fetch, in whichever process runs it -------------------------------------------------------------------------
class _Fetch:
    """The intervals of the fetch in progress in this process: transforms and collate, nested calls counted once."""

    def __init__(self) -> None:
        self.parts: Optional[List[Tuple[str, int, int]]] = None
        self.depth = 0
        self.sink: Optional[Callable[[int, int, List[Tuple[str, int, int]]], None]] = None

    def timed(self, stage: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.parts is None or self.depth:
            return fn(*args, **kwargs)
        self.depth += 1
        t0 = _now()
        try:
            return fn(*args, **kwargs)
        finally:
            self.parts.append((stage, t0, _now()))
            self.depth -= 1


_fetch = _Fetch()


class _TimedTransform:
    """A dataset's transform, timed while a batch is fetched; otherwise the callable it wraps."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _fetch.timed("transform", self.fn, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # Compose's .transforms, a user's attributes
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return repr(self.fn)


class _TimedCollate(_TimedTransform):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _fetch.timed("collate", self.fn, *args, **kwargs)


def _time_transforms(ds: Any, seen: set) -> None:
    """Wraps the transform callables of `ds` and of the datasets it wraps (Subset.dataset, ConcatDataset.datasets)."""
    if ds is None or id(ds) in seen or len(seen) > 64:
        return
    seen.add(id(ds))
    for attr in _TRANSFORM_ATTRS:
        fn = getattr(ds, attr, None)
        if callable(fn) and not isinstance(fn, _TimedTransform):
            try:
                setattr(ds, attr, _TimedTransform(fn))
            except Exception:  # noqa: BLE001  (a read-only property: its time stays in disk_read)
                pass
    _time_transforms(getattr(ds, "dataset", None), seen)
    for inner in getattr(ds, "datasets", None) or []:
        _time_transforms(inner, seen)


def _fetch_then_record(original: Callable[..., Any]) -> Callable[..., Any]:
    def fetch(self: Any, index: Any) -> Any:
        sink = _fetch.sink
        if sink is None or _fetch.parts is not None:
            return original(self, index)
        if not getattr(self, "_ddp_profile_timed", False):
            self._ddp_profile_timed = True
            _time_transforms(self.dataset, set())
            if not isinstance(self.collate_fn, _TimedCollate):
                self.collate_fn = _TimedCollate(self.collate_fn)
        _fetch.parts = parts = []
        t0 = _now()
        ok = False
        try:
            out = original(self, index)
            ok = True
            return out
        finally:
            _fetch.parts = None
            if ok:
                sink(t0, _now(), parts)
    fetch._ddp_profile = True  # type: ignore[attr-defined]
    return fetch


def _patch_fetchers() -> None:
    from torch.utils.data._utils import fetch as f

    for cls in (f._MapDatasetFetcher, f._IterableDatasetFetcher):
        if not getattr(cls.fetch, "_ddp_profile", False):
            cls.fetch = _fetch_then_record(cls.fetch)  # type: ignore[method-assign]


def _subtract(t0: int, t1: int, holes: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out, at = [], t0
    for h0, h1 in holes:
        if h1 <= at or h0 >= t1:
            continue
        if h0 > at:
            out.append((at, h0))
        at = max(at, h1)
    if at < t1:
        out.append((at, t1))
    return out


def emit_fetch(log: events.EventLog, lane: int, t0: int, t1: int, parts: List[Tuple[str, int, int]],
               item: int, epoch: int, step: int = 0) -> None:
    """A batch's fetch as spans: each transform, the collate less its nested transforms, and the rest as disk_read."""
    parts.sort(key=lambda p: p[1])
    transforms = [(a, b) for s, a, b in parts if s == "transform"]
    for a, b in transforms:
        log.span("transform", lane, a, b, step=step, item=item, epoch=epoch)
    for s, a, b in parts:
        if s == "collate":
            for x, y in _subtract(a, b, transforms):
                log.span("collate", lane, x, y, step=step, item=item, epoch=epoch)
    for x, y in _subtract(t0, t1, [(a, b) for _, a, b in parts]):
        log.span("disk_read", lane, x, y, step=step, item=item, epoch=epoch)


# -- a worker process ------------------------------------------------------------------------------------------------
class _Worker:
    """The recording of one DataLoader worker process."""

    def __init__(self, log: events.EventLog, lane: int, pass_base: int) -> None:
        self.log, self.lane = log, lane
        self.pass_no = pass_base - 1
        self.fetcher: Any = None
        self.ready: Optional[Tuple[int, int, List[Tuple[str, int, int]]]] = None

    def fetched(self, t0: int, t1: int, parts: List[Tuple[str, int, int]]) -> None:
        self.ready = (t0, t1, parts)

    def handed_over(self, idx: int) -> None:
        """The batch fetched last leaves the worker as batch `idx` of the pass."""
        if self.ready is not None:
            t0, t1, parts = self.ready
            self.ready = None
            emit_fetch(self.log, self.lane, t0, t1, parts, idx, max(self.pass_no, 0))
            self.log.flush()


_worker: Optional[_Worker] = None


def _put_then_record(original: Callable[..., Any]) -> Callable[..., Any]:
    def put(self: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        w = _worker
        if w is not None and isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], int):
            w.handed_over(obj[0])
        return original(self, obj, *args, **kwargs)
    return put


def _new_fetcher_is_a_new_pass(original: Callable[..., Any]) -> Callable[..., Any]:
    def fetch(self: Any, index: Any) -> Any:
        w = _worker
        if w is not None and self is not w.fetcher:  # a persistent worker's next pass makes a new fetcher
            w.fetcher, w.pass_no = self, w.pass_no + 1
        return original(self, index)
    return fetch


class WorkerStart:
    """The loader's worker_init_fn while a pass is recorded (picklable for the spawn start method): the worker's
    recording is set up, then the user's own worker_init_fn runs, inside the worker_start span."""

    def __init__(self, user_fn: Any, run: str, rank: int, loader: int, pass_no: int) -> None:
        self.user_fn, self.run, self.rank, self.loader, self.pass_no = user_fn, run, rank, loader, pass_no
        self.t_spawn = _now()

    def __call__(self, worker_id: int) -> None:
        global _worker
        log = events.worker_log(self.run, self.rank, self.loader, worker_id)
        lane = log.lane("loader/%d" % worker_id)
        _worker = _Worker(log, lane, self.pass_no)
        _fetch.sink = _worker.fetched
        _patch_fetchers()
        from torch.utils.data._utils import fetch as f

        for cls in (f._MapDatasetFetcher, f._IterableDatasetFetcher):
            cls.fetch = _new_fetcher_is_a_new_pass(cls.fetch)  # type: ignore[method-assign]
        q = multiprocessing.queues.Queue
        q.put = _put_then_record(q.put)  # type: ignore[method-assign]
        try:
            if self.user_fn is not None:
                self.user_fn(worker_id)
        finally:
            log.span("worker_start", lane, self.t_spawn, _now(), item=worker_id, epoch=self.pass_no)
            log.flush()


# -- the training process --------------------------------------------------------------------------------------------
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
        _patch_fetchers()
        _fetch.sink = self._fetched_here
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
        t0 = _now()
        try:
            batch = fetch()
        finally:
            self.current = None
        t1 = _now()
        b, step, log, lane = p.batch, self.steps(), self.log, self.main
        p.batch += 1
        if self.h2d is not None and self.train in (None, p.loader):
            self.h2d.armed = (step, b, p.number)

        def emit() -> None:
            log.span("wait_data", lane, t0, t1, step=step, item=b, epoch=p.number)
            if depth is not None:
                log.counter("loader_queue_depth", lane, t0, depth, step=step)
        self._emit(p.loader, emit)
        return batch

    def batch_taken(self) -> None:
        """A training forward took its batch: moves from now on are the model's, not the batch's copy."""
        if self.h2d is not None:
            self.h2d.armed = None

    def _fetched_here(self, t0: int, t1: int, parts: List[Tuple[str, int, int]]) -> None:
        """num_workers=0: the main thread fetched the batch itself."""
        p = self.current
        if p is None:
            return
        b, step, log, lane = p.batch, self.steps(), self.log, self.main
        self._emit(p.loader, lambda: emit_fetch(log, lane, t0, t1, parts, b, p.number, step))

    def pinned(self, p: Pass, idx: int, t0: int, t1: int, nbytes: int) -> None:
        log = self.log
        lane = log.lane("pin")
        self._emit(p.loader, lambda: log.span("pin", lane, t0, t1, item=idx, epoch=p.number, value=nbytes))


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
        t0 = _now()
        out = pin(data, *args, **kwargs)
        spans.pinned(state.pass_, idx, t0, _now(), _tensor_bytes(out))
        state.idx = -1
        return out

    recorded_loop._ddp_profile = True  # type: ignore[attr-defined]
    pm._pin_memory_loop = recorded_loop
    pm.pin_memory = timed_pin
