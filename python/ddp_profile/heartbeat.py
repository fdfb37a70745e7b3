"""The rank's heartbeat: the C++ runtime's 520-byte ProgressRecord (runtime/launch/progress.h), memory-mapped at
<run>/progress/rank<R>.bin, little endian. Offsets: magic u32 @0, rank i32 @4, pid i32 @8, state i32 @12,
step i64 @16, epoch i32 @24, stage i32 @28, last_ns i64 @32, bucket i32 @40, unused i32 @44,
median_step_ns i64 @48, reason char[464] @56."""
from __future__ import annotations

import mmap
import os
import statistics
import struct
import time
from typing import List, Optional

SIZE = 520
MAGIC = 0x50524F47
REASON_OFF, REASON_LEN = 56, 464

# RankState
STARTING, RUNNING, DONE, FAILED, TERMINATED = 0, 1, 2, 3, 4
# Stage ids from traces/stages.def
WAIT_DATA, FORWARD, BACKWARD, OPTIMIZER, CHECKPOINT, STEP = 4, 5, 6, 9, 10, 11


def _put(m: mmap.mmap, offset: int, fmt: str, *values: int) -> None:
    # One copy of the packed bytes: struct.pack_into would zero the field first and then write it byte by byte, and
    # the supervisor, polling the mapped file, could read a time of 0 from a rank descheduled in between.
    b = struct.pack(fmt, *values)
    m[offset : offset + len(b)] = b


class Heartbeat:
    def __init__(self, run: str, rank: int) -> None:
        d = os.path.join(run, "progress")
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(d, "rank%d.bin" % rank)
        fd = os.open(self.path, os.O_CREAT | os.O_TRUNC | os.O_RDWR | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, SIZE)
            self._m: Optional[mmap.mmap] = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._recent: List[int] = []
        self._next = 0
        m = self._m
        struct.pack_into("<iiiqiiqiiq", m, 4, rank, os.getpid(), STARTING, 0, 0, -1, time.monotonic_ns(), -1, 0, 0)
        struct.pack_into("<I", m, 0, MAGIC)  # last, as the C++ writer does

    def stage(self, s: int) -> None:
        if self._m is not None:
            _put(self._m, 28, "<i", s)
            _put(self._m, 32, "<q", time.monotonic_ns())

    def step(self, step: int, epoch: int) -> None:
        if self._m is not None:
            _put(self._m, 16, "<qiiq", step, epoch, STEP, time.monotonic_ns())

    def epoch(self, epoch: int) -> None:
        if self._m is not None:
            _put(self._m, 24, "<i", epoch)

    def step_time(self, ns: int) -> None:
        if self._m is None:
            return
        if len(self._recent) < 64:
            self._recent.append(ns)
        else:
            self._recent[self._next % 64] = ns
            self._next += 1
        _put(self._m, 48, "<q", int(statistics.median(self._recent)))

    def set_state(self, s: int) -> None:
        if self._m is not None:
            _put(self._m, 12, "<i", s)
            _put(self._m, 32, "<q", time.monotonic_ns())

    def reason(self, text: str) -> None:
        if self._m is not None:
            b = text.encode("utf-8", "replace")[: REASON_LEN - 1]
            self._m[REASON_OFF : REASON_OFF + REASON_LEN] = b + b"\0" * (REASON_LEN - len(b))
            # When it said why: of several failed ranks the supervisor blames the first (a cause precedes its effects).
            _put(self._m, 32, "<q", time.monotonic_ns())

    def has_reason(self) -> bool:
        return self._m is not None and self._m[REASON_OFF] != 0

    def fail(self, text: str) -> None:
        self.reason(text)
        self.set_state(FAILED)


def read(path: str) -> dict:
    """A snapshot of a record (for tests and tools)."""
    with open(path, "rb") as f:
        b = f.read(SIZE)
    magic, rank, pid, state, step, epoch, stage, last_ns, bucket, _, median = struct.unpack_from("<Iiiiqiiqiiq", b, 0)
    reason = b[REASON_OFF : REASON_OFF + REASON_LEN].split(b"\0", 1)[0].decode("utf-8", "replace")
    return {"magic": magic, "rank": rank, "pid": pid, "state": state, "step": step, "epoch": epoch, "stage": stage,
            "last_ns": last_ns, "bucket": bucket, "median_step_ns": median, "reason": reason}
