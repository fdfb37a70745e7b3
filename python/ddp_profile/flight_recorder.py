"""This rank's Flight Recorder dump, on the supervisor's request: when it calls a hang it creates
<run>/flight_recorder/request (layout.FLIGHT_RECORDER_REQUEST), and a daemon thread started here at attach writes
torch's pickle dump (with the stack frames that enqueued each collective) to layout.flight_recorder_dump_file(rank).
A thread, not a signal handler: Python runs handlers only in the main thread, and a hung rank's main thread is the one
blocked in a collective. The C++ side reads and matches the dumps (traces/flight_recorder); nothing is judged here."""
from __future__ import annotations

import os
import threading
from typing import Callable, Optional

from . import files, layout

POLL_S = 0.1  # how often the thread looks for the request: within the supervisor's wait (runtime/launch/user_job/hang_dumps.h)


def _dumper() -> Optional[Callable[..., bytes]]:
    try:
        import torch.distributed as dist
        from torch._C import _distributed_c10d as c10d
    except ImportError:
        return None
    if not dist.is_available():
        return None
    return getattr(c10d, "_dump_fr_trace", None)


def _answer(run: str, rank: int, dump: Callable[..., bytes]) -> None:
    request = os.path.join(run, layout.FLIGHT_RECORDER_REQUEST)
    stop = threading.Event()
    while not stop.wait(POLL_S):
        if not os.path.exists(request):
            continue
        path = os.path.join(run, layout.flight_recorder_dump_file(rank))
        try:
            # Whole or absent: the supervisor reads it as soon as it appears.
            files.write_bytes(path, dump(includeCollectives=True, includeStackTraces=True, onlyActive=False))
        except Exception as e:  # noqa: BLE001 - a dump that fails must not end the rank it describes
            with open(path + ".error", "w") as f:
                f.write("%s: %s\n" % (type(e).__name__, e))
        return


def watch(run: str, rank: int) -> None:
    """Starts the thread that answers a dump request (once per process; nothing without torch's Flight Recorder)."""
    dump = _dumper()
    if dump is None or getattr(watch, "_started", False):
        return
    setattr(watch, "_started", True)
    threading.Thread(target=_answer, args=(run, rank, dump), name="ddp_profile-flight-recorder", daemon=True).start()
