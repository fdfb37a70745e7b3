"""What DDP means to keep equal on every rank beside the parameters, as [key, value] pairs for the replicas log
(numerics.rank_sync, runtime/check/judges_rank_sync.cpp compares them across ranks, step by step):

- buffer/<name>: each floating buffer's L2 norm (one torch._foreach_norm over all of them: one reduction per step,
  not one digest per buffer), each small integer buffer's value, and `buffers`, one exact digest of all of them
  together. Taken at the step's first forward, inside the DDP model (after DDP broadcast rank 0's buffers, before
  the forward updates them from the rank's own batch): equal there unless the broadcast is off
  (broadcast_buffers=False) and nothing else syncs them (SyncBatchNorm);
- optimizer/param_groups[<i>].<key>: every hyperparameter of every param_group (lr, betas, weight_decay, ...);
- scheduler/<key>: the scheduler's state_dict entries that are plain numbers;
- sampler/<key>: the sampler's seed, num_replicas, shuffle, drop_last and epoch (its rank differs by design);
- scaler/scale: the GradScaler's loss scale.
Values are written exactly (repr of a float), so equal means equal."""
from __future__ import annotations

from typing import Any, List, Tuple

import torch

from .hashing import tensors_hash

Pairs = List[Tuple[str, str]]
_SAMPLER_KEYS = ("seed", "num_replicas", "shuffle", "drop_last", "epoch")


def _plain(v: Any) -> Any:
    """A value that compares exactly as text, or None."""
    if isinstance(v, bool) or isinstance(v, int) or isinstance(v, str):
        return repr(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return repr(v.item())
    if isinstance(v, (tuple, list)) and len(v) <= 16:
        parts = [_plain(x) for x in v]
        return None if any(p is None for p in parts) else "[" + ", ".join(parts) + "]"
    return None


def buffers(module: torch.nn.Module) -> Pairs:
    named = [(n, b) for n, b in module.named_buffers() if b is not None]
    if not named:
        return []
    floats = [(n, b) for n, b in named if b.is_floating_point() and b.numel() > 0]
    out: Pairs = [("buffers", tensors_hash(b for _, b in named))]
    if floats:
        norms = torch.stack([x.float() for x in torch._foreach_norm([b.detach() for _, b in floats])]).cpu().tolist()
        out += [("buffer/" + n, repr(v)) for (n, _), v in zip(floats, norms)]
    out += [("buffer/" + n, repr(b.item())) for n, b in named if not b.is_floating_point() and b.numel() == 1]
    return out


def optimizer(opt: Any) -> Pairs:
    out: Pairs = []
    for i, g in enumerate(getattr(opt, "param_groups", [])):
        for k in sorted(g, key=lambda k: (k != "lr", k)):  # lr first: what a difference most often is
            v = _plain(g[k]) if k != "params" else None
            if v is not None:
                out.append(("optimizer/param_groups[%d].%s" % (i, k), v))
    return out


def scheduler(sched: Any) -> Pairs:
    if sched is None or not hasattr(sched, "state_dict"):
        return []
    try:
        state = sched.state_dict()
    except Exception:  # a scheduler whose state cannot be taken (a lambda it refuses to pickle) holds nothing to say
        return []
    out: Pairs = []
    for k in sorted(state):
        v = _plain(state[k])
        if v is not None and not k.startswith("_get_lr_called"):
            out.append(("scheduler/" + k, v))
    return out


def sampler(s: Any) -> Pairs:
    out: Pairs = []
    for k in _SAMPLER_KEYS:
        v = _plain(getattr(s, k, None)) if s is not None and hasattr(s, k) else None
        if v is not None:
            out.append(("sampler/" + k, v))
    return out


def scaler(sc: Any) -> Pairs:
    if sc is None or not getattr(sc, "is_enabled", lambda: False)():
        return []
    return [("scaler/scale", repr(float(sc.get_scale())))]
