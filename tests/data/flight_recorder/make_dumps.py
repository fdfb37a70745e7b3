#!/usr/bin/env python3
"""Real PyTorch Flight Recorder dumps (CPU, Gloo over loopback), one folder per scenario.

Each scenario forks its ranks from this process (torch is imported once, before any fork; every rank makes its own
Gloo process group after the fork), records with TORCH_FR_BUFFER_SIZE set, and has every rank write
<out>/<scenario>/rank<R>.json (torch._C._distributed_c10d._dump_fr_trace_json()) and rank<R>.pkl
(_dump_fr_trace(includeStackTraces=...)), both taken back to back at the same moment.
A rank left waiting in a collective dumps from a timer thread while its main thread is blocked in it, then ends.

usage: make_dumps.py OUT [--scenario NAME ...] [--world-64 N]
Scenarios and the verdict each should give: README.md beside this script.
"""
from __future__ import annotations

import argparse
import datetime
import os
import resource
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch: 64 ranks share 2 cores

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._C import _distributed_c10d as c10d  # noqa: E402

N = 4096  # elements of the usual all_reduce
SETTLE = 0.5  # seconds between a collective's return (or failure) and a dump that should see it retired


@dataclass
class Rank:
    rank: int
    world: int
    folder: Path
    stacks: bool  # stack traces in the pickle (the JSON dump never has them)

    def dump(self, settle_s: float = 0.0) -> None:
        """settle_s: let Gloo's completion callbacks retire what just finished or failed (a collective's wait()
        returns before its entry is marked retired)."""
        time.sleep(settle_s)
        js = c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
        pk = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=self.stacks, onlyActive=False)
        for ext, data in (("json", js), ("pkl", pk)):
            tmp = self.folder / f".rank{self.rank}.{ext}.tmp"
            tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
            tmp.rename(self.folder / f"rank{self.rank}.{ext}")

    def dumped(self, rank: int) -> bool:
        return (self.folder / f"rank{rank}.pkl").exists()

    def wait_dumps(self, ranks: list[int], limit_s: float = 300.0) -> None:
        end = time.monotonic() + limit_s
        while time.monotonic() < end and not all(self.dumped(r) for r in ranks):
            time.sleep(0.05)

    def dump_later_and_exit(self, after_s: float) -> None:
        """From a thread: dump after_s from now (the main thread is blocked in a collective), wait for every other
        rank's dump (a rank that ends closes its connections and fails its peers' pending collectives), then end."""
        def go() -> None:
            time.sleep(after_s)
            self.dump()
            self.wait_dumps(self.others())
            os._exit(0)
        threading.Thread(target=go, daemon=True).start()

    def others(self) -> list[int]:
        return [r for r in range(self.world) if r != self.rank]


def prefix(t: torch.Tensor, all_reduces: int = 16) -> None:
    """seq 1 broadcast from rank 0, seq 2..all_reduces+1 all_reduce, then a barrier."""
    dist.broadcast(t, src=0)
    for _ in range(all_reduces):
        dist.all_reduce(t)
    dist.barrier()


def healthy(r: Rank) -> None:
    t = torch.ones(N)
    prefix(t)  # seq 1..18
    dist.all_reduce(t)  # 19
    dist.all_reduce(torch.ones(1, dtype=torch.float64))  # 20: [1] Double
    r.dump(SETTLE)


def stuck_rank(r: Rank) -> None:
    t = torch.ones(N)
    prefix(t)  # seq 1..18, the last a barrier
    if r.rank == 1:  # never calls all_reduce #19
        r.dump(SETTLE)
        r.wait_dumps(r.others())
        os._exit(0)
    r.dump_later_and_exit(2.0)
    dist.all_reduce(t)  # 19: never completes


def skipped_collective(r: Rank) -> None:
    """4 ranks. Per step: all_reduce [4096] Float (grads), then all_reduce [1] Double (loss); rank 2 skips the loss
    of step 3 (seq 8) and goes on to step 4's grads, so its seq 8 is [4096] Float where the others' is [1] Double.
    The others dump while blocked in seq 8; then rank 2 enqueues its seq 8, which Gloo cannot match, and dumps
    when it fails (a peer that receives more bytes than it expects is aborted by Gloo)."""
    grads, loss = torch.ones(N), torch.ones(1, dtype=torch.float64)
    for step in range(6):
        dist.all_reduce(grads)  # seq 2*step+1
        if step == 3 and r.rank == 2:
            r.wait_dumps(r.others())
            w = dist.all_reduce(grads, async_op=True)  # rank 2's seq 8
            try:
                w.wait()
            except RuntimeError as e:
                print(f"rank 2: its seq 8 failed: {str(e).splitlines()[0][:160]}", file=sys.stderr)
            r.dump(SETTLE)
            os._exit(0)
        if step == 3:
            r.dump_later_and_exit(2.0)
        dist.all_reduce(loss)  # seq 2*step+2


def mismatch(r: Rank, odd: torch.Tensor, usual: torch.Tensor, first: int) -> None:
    """seq 1..6 as healthy's start, then seq 7 all_reduce where rank 1 gives `odd` and rank 0 `usual`.
    Gloo aborts (SIGABRT, gloo::EnforceNotMet) the rank that receives more bytes than it expects, so that rank
    (`first`) enqueues first and dumps while pending; then the other enqueues, sees the peer die, and dumps."""
    t = torch.ones(N)
    prefix(t, all_reduces=4)  # seq 1..6
    mine = odd if r.rank == 1 else usual
    if r.rank != first:
        r.wait_dumps([first])
    w = dist.all_reduce(mine, async_op=True)  # seq 7
    if r.rank == first:
        time.sleep(0.5)
        r.dump()
        time.sleep(30)  # Gloo aborts this process once the other rank's data arrives
        os._exit(3)
    try:
        w.wait()
    except RuntimeError as e:
        print(f"rank {r.rank}: seq 7 failed: {str(e).splitlines()[0][:160]}", file=sys.stderr)
    r.dump(SETTLE)


def size_mismatch(r: Rank) -> None:
    mismatch(r, torch.ones(N // 2), torch.ones(N), first=1)  # [2048] on rank 1 receives 4096 floats' chunks


def dtype_mismatch(r: Rank) -> None:
    mismatch(r, torch.ones(N, dtype=torch.float64), torch.ones(N), first=0)  # rank 0's Float receives Double


def second_group(r: Rank) -> None:
    """4 ranks; pg 0 (default) interleaved with a subgroup per pair of ranks: [0, 1] "pair" and [2, 3] "rest"
    (every rank makes both; each runs its own)."""
    t = torch.ones(N)
    pair = dist.new_group([0, 1], group_desc="pair")
    rest = dist.new_group([2, 3], group_desc="rest")
    dist.all_reduce(t)
    mine = pair if r.rank < 2 else rest
    dist.all_reduce(torch.ones(1024), group=mine)
    dist.broadcast(torch.ones(1024), src=0 if r.rank < 2 else 2, group=mine)
    dist.all_reduce(t)
    dist.barrier()
    r.dump(SETTLE)


def wrapped(r: Rank) -> None:
    """2 ranks, TORCH_FR_BUFFER_SIZE=8, 20 collectives: only seq 13..20 are left in the ring buffer."""
    t = torch.ones(N)
    for i in range(20):
        if i % 5 == 4:
            dist.barrier()
        else:
            dist.all_reduce(t)
    r.dump(SETTLE)


def long_memo(r: Rank) -> None:
    """2 ranks, stack traces on: all_reduce [8] from 110 call sites of their own (a function name and a file name
    each), then the last site again and two broadcasts, so the pickle's memo passes 256 and holds LONG_BINPUT and
    LONG_BINGET, as long real dumps do."""
    t = torch.ones(8)
    site: Callable[[torch.Tensor], None] = dist.all_reduce
    for i in range(110):
        ns: dict[str, object] = {"dist": dist}
        exec(compile(f"def site_{i}(t):\n    dist.all_reduce(t)\n", f"<site {i}>", "exec"), ns)
        site = ns[f"site_{i}"]  # type: ignore[assignment]
        site(t)
    for _ in range(3):
        site(t)
    dist.broadcast(t, src=0)
    dist.broadcast(t, src=1)
    r.dump(SETTLE)


STUCK_64 = 37


def stuck_64(r: Rank) -> None:
    """Many ranks; seq 1 broadcast [1024], 2..9 all_reduce [1024], 10 barrier; rank 37 never calls all_reduce #11."""
    t = torch.ones(1024)
    prefix(t, all_reduces=8)
    if r.rank == STUCK_64 % r.world:
        r.dump(SETTLE)
        r.wait_dumps(r.others())
        os._exit(0)
    r.dump_later_and_exit(3.0)
    dist.all_reduce(t)  # 11


@dataclass
class Scenario:
    body: Callable[[Rank], None]
    world: int
    buffer: int = 2000
    stacks: bool = False
    timeout_s: int = 10
    limit_s: float = 60.0


SCENARIOS: dict[str, Scenario] = {
    "healthy": Scenario(healthy, 2, stacks=True),
    "stuck_rank": Scenario(stuck_rank, 2),
    "skipped_collective": Scenario(skipped_collective, 4),
    "size_mismatch": Scenario(size_mismatch, 2),
    "dtype_mismatch": Scenario(dtype_mismatch, 2),
    "second_group": Scenario(second_group, 4),
    "wrapped": Scenario(wrapped, 2, buffer=8),
    "long_memo": Scenario(long_memo, 2, stacks=True),
    "stuck_64": Scenario(stuck_64, 64, buffer=64, timeout_s=120, limit_s=600.0),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child(sc: Scenario, rank: int, port: int, folder: Path) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # Gloo's aborts leave no core files
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCH_FR_BUFFER_SIZE=str(sc.buffer))
    code = 0
    try:
        dist.init_process_group("gloo", rank=rank, world_size=sc.world,
                                timeout=datetime.timedelta(seconds=sc.timeout_s))
        sc.body(Rank(rank, sc.world, folder, sc.stacks))
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - a rank reports and ends, whatever happened
        when = " (after its dump)" if (folder / f"rank{rank}.pkl").exists() else ""
        print(f"rank {rank}{when}: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}",
              file=sys.stderr)
        code = 1
    sys.stderr.flush()
    os._exit(code)


def run(name: str, sc: Scenario, out: Path) -> bool:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    for f in folder.glob("rank*.*"):
        f.unlink()
    port, start = free_port(), time.monotonic()
    pids: dict[int, int] = {}
    for rank in range(sc.world):
        pid = os.fork()
        if pid == 0:
            child(sc, rank, port, folder)
        pids[pid] = rank
    status: dict[int, str] = {}
    end = start + sc.limit_s
    while pids and time.monotonic() < end:
        pid, st = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            continue
        rank = pids.pop(pid)
        status[rank] = f"signal {os.WTERMSIG(st)}" if os.WIFSIGNALED(st) else f"exit {os.WEXITSTATUS(st)}"
    for pid, rank in pids.items():  # past the limit: ours, by id
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status[rank] = "killed at the limit"
    took = time.monotonic() - start
    missing = [r for r in range(sc.world) if not (folder / f"rank{r}.pkl").exists()]
    odd = {r: s for r, s in sorted(status.items()) if s != "exit 0"}
    print(f"{name}: {sc.world} ranks in {took:.1f} s; not exit 0: {odd or 'none'}; no dump: {missing or 'none'}")
    return not missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    ap.add_argument("--world-64", type=int, default=64, help="ranks of stuck_64 (default 64)")
    a = ap.parse_args()
    SCENARIOS["stuck_64"].world = a.world_64
    print(f"torch {torch.__version__}, gloo on 127.0.0.1")
    ok = all([run(n, SCENARIOS[n], a.out) for n in (a.scenario or list(SCENARIOS))])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
