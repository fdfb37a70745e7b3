"""One DataLoader worker process under --record: loader.worker_init_fn is WorkerStart while a pass is recorded; in the
worker it opens the process's event log (lane loader/<w>), times every fetch (fetch_spans.py), and writes each batch's
spans when the worker hands the batch over (multiprocessing's Queue.put of (index, data): the batch's number in the
pass), with the pass (a persistent worker's next pass makes a new fetcher). Its start-up, from the pass creating it to
the end of the user's worker_init_fn, is `worker_start`."""
from __future__ import annotations

import multiprocessing.queues
import multiprocessing.util
import os
import signal
import time
from typing import Any, Callable, List, Optional, Tuple

from . import events, fetch_spans
from .thread_cpu import Moment

_now = time.monotonic_ns


class _Worker:
    """The recording of one DataLoader worker process."""

    def __init__(self, log: events.EventLog, lane: int, pass_base: int) -> None:
        self.log, self.lane = log, lane
        self.pass_no = pass_base - 1
        self.fetcher: Any = None
        self.ready: Optional[Tuple[Moment, Moment, List[fetch_spans.Part]]] = None

    def fetched(self, start: Moment, end: Moment, parts: List[fetch_spans.Part]) -> None:
        self.ready = (start, end, parts)

    def handed_over(self, idx: int) -> None:
        """The batch fetched last leaves the worker as batch `idx` of the pass."""
        if self.ready is not None:
            start, end, parts = self.ready
            self.ready = None
            fetch_spans.emit_fetch(self.log, self.lane, start, end, parts, idx, max(self.pass_no, 0))
            if self.log.flush_if_due():
                self.write_steps()

    def write_steps(self) -> None:
        """The Compose steps' totals so far, into the process's header."""
        if fetch_spans.in_progress.steps:
            self.log.set(transform_steps=dict(fetch_spans.in_progress.steps))


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


def _flush_when_terminated(log: events.EventLog) -> None:
    """A worker still alive when its training process exits is terminated (SIGTERM to a daemonic child), which runs
    no finalizer: the batches since its last flush (up to a quarter of a second of them) would be lost. It writes
    them first, then ends as the signal would have ended it (or does what the job's own disposition says: its handler,
    or nothing when it ignored the signal)."""
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        try:
            # Nothing that waits for a lock: the signal may have stopped this thread inside one (the header's
            # Compose totals, rewritten at every timed flush, may lose their last update).
            log.flush(wait=False)  # not closed: a worker that ignores SIGTERM goes on recording
        finally:
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the worker's main thread (a thread-based loader): nothing to flush at a signal
        pass


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
        multiprocessing.util.Finalize(_worker, _worker.write_steps, exitpriority=11)  # before the log's close
        _flush_when_terminated(log)
        fetch_spans.in_progress.sink = _worker.fetched
        fetch_spans.patch_fetchers()
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
