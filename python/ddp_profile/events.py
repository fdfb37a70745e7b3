"""One process's data-path events under --record: the 40-byte Event of traces/model/event.h (layout.EVENT_FORMAT),
appended to datapath/rank<R>.p<pid>.events, with a header beside it (layout.DATAPATH_RECORD) naming the process,
its lanes and, for the training process, the clock handshake and the training loader. `ddp_profile --record` turns
every process's events into the rank's native trace (traces/native/datapath_import.h).

Times are CLOCK_MONOTONIC (time.monotonic_ns): one clock for a rank's training process and its DataLoader workers
(same host); the handshake (clock.py) puts the ranks on rank 0's. Writes go out with one os.write per flush, so
what was flushed survives the process being killed; the training process flushes at every optimizer step, a worker
when a quarter of a second has passed since its last flush (a write per batch cost a data-heavy fetch 2%) and when
it exits."""
from __future__ import annotations

import multiprocessing.util
import os
import struct
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import files, layout

_EVENT = struct.Struct(layout.EVENT_FORMAT)
assert _EVENT.size == layout.EVENT_SIZE
STAGE = layout.STAGES
COUNTER = layout.COUNTERS
_FLUSH_BYTES = 1 << 16
_FLUSH_EVERY_NS = 250_000_000


def _wait_us(wait_ns: int) -> int:
    """A cpu event's wait for a core in us (traces/model/span_cpu.h), WAIT_UNKNOWN when the kernel did not say."""
    return layout.WAIT_UNKNOWN if wait_ns < 0 else min((wait_ns + 500) // 1000, layout.WAIT_UNKNOWN - 1)


class EventLog:
    def __init__(self, run: str, rank: int, role: str, **header: Any) -> None:
        self.run, self.rank, self.pid = run, rank, os.getpid()
        self.lanes: List[str] = []
        self.header: Dict[str, Any] = {"rank": rank, "pid": self.pid, "role": role, **header}
        os.makedirs(os.path.join(run, layout.DATAPATH_DIR), exist_ok=True)
        self.fd = os.open(os.path.join(run, layout.datapath_events_file(rank, self.pid)),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.buf = bytearray()
        self.flushed_at = time.monotonic_ns()
        self.lock = threading.Lock()
        self.header_lock = threading.Lock()
        self.write_header()

    def lane(self, name: str) -> int:
        """The lane id of `name` in this process, named in the header from its first use (the pin thread may ask
        while the main thread does: the header is written by one thread at a time)."""
        with self.header_lock:
            if name in self.lanes:
                return self.lanes.index(name)
            self.lanes.append(name)
            self.write_header()
            return len(self.lanes) - 1

    def set(self, **fields: Any) -> None:
        with self.header_lock:
            self.header.update(fields)
            self.write_header()

    def write_header(self) -> None:
        files.write_record(os.path.join(self.run, layout.datapath_header_file(self.rank, self.pid)),
                           layout.DATAPATH_RECORD, dict(self.header, lanes=list(self.lanes)))

    def span(self, stage: str, lane: int, t0: int, t1: int, step: int = 0, item: int = 0, epoch: int = 0,
             bucket: int = layout.NO_BUCKET, value: int = 0, micro: int = 0,
             cpu: Optional[Tuple[int, int]] = None) -> None:
        """A span, and its CPU split (thread_cpu.split: on a CPU, waiting for one) as a cpu event after it."""
        args = (t0, max(t1, t0), value, step & 0xFFFFFFFF, item & 0xFFFFFFFF, epoch & 0xFFFF, bucket, min(micro, 255),
                STAGE[stage])
        e = _EVENT.pack(*args, layout.EVENT_SPAN, lane)
        if cpu is not None:
            e += _EVENT.pack(args[0], args[1], cpu[0], args[3], _wait_us(cpu[1]), *args[5:], layout.EVENT_CPU, lane)
        with self.lock:
            self.buf += e
            full = len(self.buf) >= _FLUSH_BYTES
        if full:
            self.flush()

    def batch_spans(self, lane: int, spans: List[Tuple[str, int, int, Optional[Tuple[int, int]]]], step: int,
                    item: int, epoch: int) -> None:
        """One batch's spans (stage, t0, t1, CPU split or None) at once: one append under the lock (a worker writes
        a batch's fetch); each split as a cpu event after its span."""
        pack_into = _EVENT.pack_into
        out = bytearray(sum(1 if c is None else 2 for *_, c in spans) * layout.EVENT_SIZE)
        s, i, e, nb, kind = step & 0xFFFFFFFF, item & 0xFFFFFFFF, epoch & 0xFFFF, layout.NO_BUCKET, layout.EVENT_SPAN
        at = 0
        for stage, t0, t1, cpu in spans:
            pack_into(out, at, t0, t1, 0, s, i, e, nb, 0, STAGE[stage], kind, lane)
            at += layout.EVENT_SIZE
            if cpu is not None:
                pack_into(out, at, t0, t1, cpu[0], s, _wait_us(cpu[1]), e, nb, 0, STAGE[stage], layout.EVENT_CPU, lane)
                at += layout.EVENT_SIZE
        with self.lock:
            self.buf += out
            full = len(self.buf) >= _FLUSH_BYTES
        if full:
            self.flush()

    def counter(self, counter: str, lane: int, t: int, value: int, step: int = 0) -> None:
        e = _EVENT.pack(t, t, max(value, 0), step & 0xFFFFFFFF, 0, 0, layout.NO_BUCKET, 0, COUNTER[counter],
                        layout.EVENT_COUNTER, lane)
        with self.lock:
            self.buf += e

    def flush_if_due(self) -> bool:
        """Flushes when _FLUSH_EVERY_NS have passed since the last flush; says whether it did."""
        if time.monotonic_ns() - self.flushed_at < _FLUSH_EVERY_NS:
            return False
        self.flush()
        return True

    def flush(self, wait: bool = True) -> None:
        """Writes what is buffered. wait=False (a signal handler, which may have interrupted this thread inside the
        lock): writes nothing rather than block when the lock is held."""
        self.flushed_at = time.monotonic_ns()
        if not self.lock.acquire(blocking=wait):
            return
        try:
            data, self.buf = bytes(self.buf), bytearray()
        finally:
            self.lock.release()
        if data and self.fd >= 0:
            try:
                os.write(self.fd, data)
            except OSError:
                pass  # the profiler never ends the user's job; the converter says what is missing

    def close(self) -> None:
        self.flush()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_log: Optional[EventLog] = None


def process_log(run: str, rank: int) -> EventLog:
    """The training process's log (created at first use; a forked worker makes its own with worker_log)."""
    global _log
    if _log is None or _log.pid != os.getpid() or _log.run != run or _log.rank != rank:
        _log = EventLog(run, rank, "main")
    return _log


def worker_log(run: str, rank: int, loader: int, worker: int) -> EventLog:
    """A DataLoader worker process's log, flushed when the worker exits (multiprocessing runs its finalizers; a
    worker does not run atexit handlers)."""
    global _log
    _log = EventLog(run, rank, "worker", loader=loader, worker=worker)
    multiprocessing.util.Finalize(_log, _log.close, exitpriority=10)
    return _log
