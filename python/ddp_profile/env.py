"""The environment contract set by the outer `ddp_profile --check/--record -- LAUNCH...`."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Tuple

from . import layout


@dataclass(frozen=True)
class Fault:
    kind: str  # kill | throw | hang
    rank: int
    step: int


@dataclass(frozen=True)
class Config:
    run: str                     # DDP_PROFILE_RUN, absolute run folder
    mode: str                    # check | record
    verify_steps: int            # DDP_PROFILE_VERIFY_STEPS
    fault: Optional[Fault]       # DDP_PROFILE_FAULT kind,rank,step
    hold_after_save: int         # DDP_PROFILE_HOLD_AFTER_SAVE (1-based), 0: none
    schedule: Tuple[int, int, int]  # DDP_PROFILE_SCHEDULE wait,warmup,active

    @property
    def check(self) -> bool:
        return self.mode == "check"


def _int(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    try:
        return int(v) if v else default
    except ValueError:
        return default


def _fault(spec: str) -> Optional[Fault]:
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) != 3 or parts[0] not in ("kill", "throw", "hang"):
        return None
    try:
        return Fault(parts[0], int(parts[1]), int(parts[2]))
    except ValueError:
        return None


def _schedule(spec: str) -> Tuple[int, int, int]:
    try:
        w, u, a = (int(p) for p in spec.split(","))
        return (max(w, 0), max(u, 0), max(a, 1))
    except ValueError:
        return (1, 1, 5)


class FormatMismatch(RuntimeError):
    """The ddp_profile running this job reads another heartbeat format than this companion writes."""


def check_format() -> None:
    """Refuses, naming both versions, a companion whose records the running ddp_profile would misread."""
    theirs = os.environ.get(layout.ENV_FORMAT, "").strip()
    if theirs != str(layout.HEARTBEAT_FORMAT_VERSION):
        raise FormatMismatch(
            "this ddp_profile companion writes heartbeat format %d, but the ddp_profile running the job reads format "
            "%s: install the companion of that ddp_profile (pip install the wheel it came in, docs/install.md)"
            % (layout.HEARTBEAT_FORMAT_VERSION, theirs or "unknown (it set no %s)" % layout.ENV_FORMAT))


def read() -> Optional[Config]:
    """The contract, or None when DDP_PROFILE_RUN is unset (the companion is then a passthrough)."""
    run = os.environ.get(layout.ENV_RUN, "").strip()
    if not run:
        return None
    mode = os.environ.get(layout.ENV_MODE, "check").strip() or "check"
    if mode not in ("check", "record"):
        mode = "check"
    return Config(
        run=os.path.abspath(run),
        mode=mode,
        verify_steps=max(_int(layout.ENV_VERIFY_STEPS, 3), 0),
        fault=_fault(os.environ.get(layout.ENV_FAULT, "")),
        hold_after_save=_int(layout.ENV_HOLD_AFTER_SAVE, 0),
        schedule=_schedule(os.environ.get(layout.ENV_SCHEDULE, "1,1,5")),
    )


def launch_method() -> str:
    e = os.environ
    if "TORCHELASTIC_RUN_ID" in e:
        return "torchrun"
    if "SLURM_PROCID" in e:
        return "srun"
    if "OMPI_COMM_WORLD_RANK" in e or "PMI_RANK" in e:
        return "mpirun"
    return "python"


def rank_world() -> Tuple[int, int, int]:
    """(rank, world_size, local_rank): torch.distributed when initialised, else RANK/WORLD_SIZE, else 0/1."""
    import torch.distributed as dist

    local = _int("LOCAL_RANK", _int("SLURM_LOCALID", _int("OMPI_COMM_WORLD_LOCAL_RANK", 0)))
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), local
    return _int("RANK", 0), _int("WORLD_SIZE", 1), local
