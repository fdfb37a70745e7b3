"""The ranks' clocks from a handshake, as our own runtime measures them: every rank reads its CLOCK_MONOTONIC right
after the same collective returns (they return together, within the collective's exit skew), then the readings are
exchanged. Over several rounds, the offset that puts rank r on rank 0's clock is the median of (t_0 - t_r); the
uncertainty is half the spread of the middle half of the rounds (the exit skew the estimate could not see; a round
whose exit a busy core delayed is an outlier, not the clock)."""
from __future__ import annotations

import time
from typing import Any, Dict, Optional

import torch

ROUNDS = 9


def handshake(device: Any) -> Optional[Dict[str, int]]:
    """{clock_offset_ns, clock_uncertainty_ns, clock_rounds} of this rank; None without torch.distributed."""
    d = torch.distributed
    if not (d.is_available() and d.is_initialized()):
        return None
    world = d.get_world_size()
    mark = torch.zeros(1, dtype=torch.int64, device=device)
    offsets = []
    for _ in range(ROUNDS):
        d.all_reduce(mark)  # the rounds' common moment: every rank leaves it together
        mine = torch.tensor([time.monotonic_ns()], dtype=torch.int64, device=device)
        got = [torch.zeros_like(mine) for _ in range(world)]
        d.all_gather(got, mine)
        offsets.append(int(got[0].item()) - int(mine.item()))
    offsets.sort()
    n = len(offsets)
    return {"clock_offset_ns": offsets[n // 2], "clock_uncertainty_ns": (offsets[(3 * n) // 4] - offsets[n // 4]) // 2,
            "clock_rounds": ROUNDS}
