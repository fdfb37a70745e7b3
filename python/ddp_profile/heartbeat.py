"""The rank's heartbeat: the C++ runtime's ProgressRecord, memory-mapped at <run>/progress/rank<R>.bin. Its size,
offsets, magic and format version come from layout.py (checked against runtime/launch/heartbeat/progress.h by the C++ test)."""
from __future__ import annotations

import mmap
import os
import statistics
import struct
import time
from typing import List, Optional

from . import layout

SIZE = layout.HEARTBEAT_SIZE
MAGIC = layout.HEARTBEAT_MAGIC
F = layout.HEARTBEAT_FIELDS
REASON_OFF, REASON_LEN = F["reason"][0], int(F["reason"][1][:-1])

STARTING, RUNNING, DONE, FAILED, TERMINATED = (layout.STARTING, layout.RUNNING, layout.DONE, layout.FAILED,
                                               layout.TERMINATED)
WAIT_DATA, FORWARD, BACKWARD = layout.STAGES["wait_data"], layout.STAGES["forward"], layout.STAGES["backward"]
OPTIMIZER, CHECKPOINT, STEP = layout.STAGES["optimizer"], layout.STAGES["checkpoint"], layout.STAGES["step"]


def _put(m: mmap.mmap, offset: int, fmt: str, *values: int) -> None:
    # One copy of the packed bytes: struct.pack_into would zero the field first and then write it byte by byte, and
    # the supervisor, polling the mapped file, could read a time of 0 from a rank descheduled in between.
    b = struct.pack(fmt, *values)
    m[offset : offset + len(b)] = b


def _field(m: mmap.mmap, name: str, value: int) -> None:
    off, fmt = F[name]
    _put(m, off, "<" + fmt, value)


class Heartbeat:
    def __init__(self, run: str, rank: int) -> None:
        self.path = os.path.join(run, layout.progress_file(rank))
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_TRUNC | os.O_RDWR | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, SIZE)
            self._m: Optional[mmap.mmap] = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._recent: List[int] = []
        self._next = 0
        m = self._m
        for name, value in (("rank", rank), ("pid", os.getpid()), ("state", STARTING), ("step", 0), ("epoch", 0),
                            ("stage", -1), ("last_ns", time.monotonic_ns()), ("bucket", -1),
                            ("format_version", layout.HEARTBEAT_FORMAT_VERSION), ("median_step_ns", 0)):
            _field(m, name, value)
        _field(m, "magic", MAGIC)  # last, as the C++ writer does

    def stage(self, s: int) -> None:
        if self._m is not None:
            _field(self._m, "stage", s)
            _field(self._m, "last_ns", time.monotonic_ns())

    def step(self, step: int, epoch: int) -> None:
        if self._m is not None:
            # step, epoch, stage and last_ns lie side by side: one copy.
            assert (F["epoch"][0], F["stage"][0], F["last_ns"][0]) == (F["step"][0] + 8, F["step"][0] + 12,
                                                                       F["step"][0] + 16)
            _put(self._m, F["step"][0], "<qiiq", step, epoch, STEP, time.monotonic_ns())

    def epoch(self, epoch: int) -> None:
        if self._m is not None:
            _field(self._m, "epoch", epoch)

    def step_time(self, ns: int) -> None:
        if self._m is None:
            return
        if len(self._recent) < 64:
            self._recent.append(ns)
        else:
            self._recent[self._next % 64] = ns
            self._next += 1
        _field(self._m, "median_step_ns", int(statistics.median(self._recent)))

    def set_state(self, s: int) -> None:
        if self._m is not None:
            _field(self._m, "state", s)
            _field(self._m, "last_ns", time.monotonic_ns())

    def reason(self, text: str) -> None:
        if self._m is not None:
            b = text.encode("utf-8", "replace")[: REASON_LEN - 1]
            self._m[REASON_OFF : REASON_OFF + REASON_LEN] = b + b"\0" * (REASON_LEN - len(b))
            # When it said why: of several failed ranks the supervisor blames the first (a cause precedes its effects).
            _field(self._m, "last_ns", time.monotonic_ns())

    def has_reason(self) -> bool:
        return self._m is not None and self._m[REASON_OFF] != 0

    def fail(self, text: str) -> None:
        self.reason(text)
        self.set_state(FAILED)


def read(path: str) -> dict:
    """A snapshot of a record (for tests and tools)."""
    with open(path, "rb") as f:
        b = f.read(SIZE)
    out = {name: struct.unpack_from("<" + fmt, b, off)[0] for name, (off, fmt) in F.items() if name != "reason"}
    out["reason"] = b[REASON_OFF : REASON_OFF + REASON_LEN].split(b"\0", 1)[0].decode("utf-8", "replace")
    return out
