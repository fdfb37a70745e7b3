"""Moments of the calling thread: the monotonic time with the thread's CPU time and its time waiting for a core, read
together at a span's ends so the span can say where its wall time went (traces/model/span_cpu.h; the C++ recorder's
profiler/thread_cpu.h reads the same: CLOCK_THREAD_CPUTIME_ID and /proc/thread-self/schedstat's run delay, which the
kernel adds each time the thread gets a CPU). A kernel without schedstat gives the CPU time only (wait -1). A span's
split is known when both its moments were taken on one thread; each moment costs ~1 us (time.thread_time_ns and
one os.pread, measured on this project's 2-vCPU machine)."""
from __future__ import annotations

import os
import threading
import time
from typing import NamedTuple, Optional, Tuple

_monotonic = time.monotonic_ns
_thread_cpu = time.thread_time_ns


class Moment(NamedTuple):
    t: int       # time.monotonic_ns
    cpu: int     # the thread's CPU time, ns
    wait: int    # the thread's run-queue wait so far, ns; -1: not known
    thread: Tuple[int, int]  # which thread took it: (pid, thread ident)


class _SchedStat(threading.local):
    """This thread's /proc/thread-self/schedstat, opened on its first read ("thread-self" names the opener; a forked
    worker opens its own, as the pid says)."""

    def __init__(self) -> None:
        self.fd: Optional[int] = None
        self.pid = -1

    def run_delay(self) -> int:
        if self.pid != os.getpid():
            self.pid = os.getpid()
            try:
                self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.fd = None
        if self.fd is None:
            return -1
        try:
            return int(os.pread(self.fd, 64, 0).split()[1])
        except (OSError, ValueError, IndexError):
            return -1


_schedstat = _SchedStat()


def moment() -> Moment:
    t = _monotonic()
    return Moment(t, _thread_cpu(), _schedstat.run_delay(), (os.getpid(), threading.get_ident()))


def cpu_moment() -> Moment:
    """A moment without the run-queue wait (wait -1): the monotonic time and the thread's CPU time alone, ~0.3 us.
    Inside a DataLoader worker's fetch a schedstat read costs ~10 us (measured in bench/datapath_fetch_bench.py: 0.2 ms
    a batch of 8 images at two reads an image, 4 % of the fetch); a fetch's inner spans take these, and their waits
    are the fetch's, shared as processor sharing shares it (apportion_wait)."""
    return Moment(_monotonic(), _thread_cpu(), -1, (os.getpid(), threading.get_ident()))


def apportion_wait(total: Optional[Tuple[int, int]], cpu: int) -> int:
    """The wait for a core of a span that ran `cpu` ns of an interval whose split is `total` (its spans tile it): on
    a thread, processor sharing makes each ms of CPU wait alike, so the interval's wait goes to its spans in proportion
    to their CPU time (a span blocked on I/O, no CPU, gets none). -1 when the interval's wait is not known."""
    if total is None or total[1] < 0:
        return -1
    return total[1] * cpu // total[0] if total[0] > 0 else 0


def split(a: Moment, b: Moment) -> Optional[Tuple[int, int]]:
    """(on a CPU, waiting for one) between two moments, in ns; wait -1 when not known; None when they were taken on
    different threads (a span that begins on one and ends on another has no one thread's split)."""
    if a.thread != b.thread:
        return None
    wait = b.wait - a.wait if a.wait >= 0 and b.wait >= 0 else -1
    return max(b.cpu - a.cpu, 0), wait
