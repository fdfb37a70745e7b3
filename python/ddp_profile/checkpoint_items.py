"""What a dp.save state holds, compared with what a resume needs. The state object is walked once:
- a dict with "state" and "param_groups" is an optimizer state: "optimizer.param_groups", and
  "optimizer.state:<param name>" per parameter index with non-empty state (index -> name in the live optimizer's
  order); its subtree is not searched further. A dict holding every key of scheduler.state_dict() is "scheduler",
  of scaler.state_dict() "scaler" (likewise not searched further).
- any dict entry "k": tensor with k (less a "module." prefix) a key of the unwrapped module's state_dict, same shape
  and equal values: "param:<k>" / "buffer:<k>", where <k> is the first name of a tensor the module holds under
  several (tied weights, ground.tied_names): stored under any of its names, it is stored.
- elsewhere: a number under a key containing "epoch" -> "epoch" (the Hugging Face Trainer's is fractional: the
  epoch and how far into it); an int under a key containing "step" or "iteration" -> "step"; any value
  (not a tensor) under a key containing "batch", "position" or "sampler" -> "sampler.position".
- rng: a uint8 tensor shaped like torch.get_rng_state() -> "rng.torch"; one shaped like a CUDA generator state (or a
  list of them) -> "rng.cuda"; a ("MT19937", array, ...) tuple or a dict with "bit_generator" -> "rng.numpy"; a
  (3, tuple of 625 ints, None) tuple -> "rng.random".
Expected: every param/buffer (tied names once), optimizer.state for parameters with live state, optimizer.param_groups, epoch, step,
scheduler / scaler when given (scaler only when enabled), sampler.position when a sampler is known, rng.torch,
rng.random, rng.cuda when CUDA is initialised, rng.numpy when the script's __main__ imported numpy."""
from __future__ import annotations

import sys
import types
from typing import Any, Dict, List, Optional, Set

import torch
import torch.nn as nn

from .ground import tied_names
from .hashing import same_bits


def _main_uses_numpy() -> bool:
    main = sys.modules.get("__main__")
    for v in list(vars(main).values()) if main is not None else ():
        try:
            name = v.__name__ if isinstance(v, types.ModuleType) else str(getattr(v, "__module__", "") or "")
        except Exception:
            continue
        if name == "numpy" or name.startswith("numpy."):
            return True
    return False


class Items:
    def __init__(self, module: nn.Module, optimizer: Any, scheduler: Any, scaler: Any, has_sampler: bool) -> None:
        self.module, self.optimizer, self.scheduler, self.scaler = module, optimizer, scheduler, scaler
        self.has_sampler = has_sampler
        self.param_names = {id(p): n for n, p in module.named_parameters()}
        self.buffer_names = {n for n, _ in module.named_buffers()}
        self.first_name = tied_names(module)

    def _opt_index_names(self) -> Dict[int, str]:
        out: Dict[int, str] = {}
        i = 0
        for g in self.optimizer.param_groups:
            for p in g["params"]:
                out[i] = self.param_names.get(id(p), str(i))
                i += 1
        return out

    def expected(self) -> List[str]:
        e = ["param:" + n if n not in self.buffer_names else "buffer:" + n
             for n, first in self.first_name.items() if n == first]
        names = self._opt_index_names()
        live = {id(p) for p, s in self.optimizer.state.items() if s}
        i = 0
        for g in self.optimizer.param_groups:
            for p in g["params"]:
                if id(p) in live:
                    e.append("optimizer.state:" + names[i])
                i += 1
        e += ["optimizer.param_groups", "epoch", "step"]
        if self.scheduler is not None:
            e.append("scheduler")
        if self.scaler is not None and getattr(self.scaler, "is_enabled", lambda: True)():
            e.append("scaler")
        if self.has_sampler:
            e.append("sampler.position")
        e += ["rng.torch", "rng.random"]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            e.append("rng.cuda")
        if _main_uses_numpy():
            e.append("rng.numpy")
        return e

    def found(self, state: Any) -> List[str]:
        self._live = self.module.state_dict()
        self._rng = torch.get_rng_state()
        self._cuda_shape = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self._cuda_shape = tuple(torch.cuda.get_rng_state().shape)
        self._sched_keys = set(self.scheduler.state_dict()) if self.scheduler is not None else None
        self._scaler_keys = set(self.scaler.state_dict()) if self.scaler is not None else None
        self._names = self._opt_index_names()
        out: Set[str] = set()
        self._walk(state, None, out, 0)
        order = self.expected()
        return [x for x in order if x in out] + sorted(out - set(order))

    def _walk(self, v: Any, key: Optional[str], out: Set[str], depth: int) -> None:
        if depth > 64:
            return
        k = key.lower() if isinstance(key, str) else ""
        if isinstance(v, torch.Tensor):
            self._tensor(v, key, out)
        elif isinstance(v, dict):
            if "state" in v and "param_groups" in v:
                if isinstance(v.get("param_groups"), list):
                    out.add("optimizer.param_groups")
                st = v.get("state")
                if isinstance(st, dict):
                    for i, s in st.items():
                        if s and isinstance(i, int):
                            out.add("optimizer.state:" + self._names.get(i, str(i)))
                return
            ks = {x for x in v if isinstance(x, str)}
            if self._sched_keys and self._sched_keys <= ks:
                out.add("scheduler")
                return
            if self._scaler_keys and self._scaler_keys <= ks:
                out.add("scaler")
                return
            if "bit_generator" in v:
                out.add("rng.numpy")
                return
            for kk, vv in v.items():
                self._walk(vv, kk if isinstance(kk, str) else str(kk), out, depth + 1)
        elif isinstance(v, (tuple, list)):
            if len(v) >= 2 and v[0] == "MT19937":
                out.add("rng.numpy")
                return
            if len(v) == 3 and v[0] == 3 and isinstance(v[1], tuple) and len(v[1]) == 625:
                out.add("rng.random")
                return
            if v and all(isinstance(x, torch.Tensor) for x in v) and self._cuda_shape is not None and all(
                    x.dtype == torch.uint8 and tuple(x.shape) == self._cuda_shape for x in v):
                out.add("rng.cuda")
                return
            for x in v:
                self._walk(x, key, out, depth + 1)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and "epoch" in k:
            out.add("epoch")
        if isinstance(v, int) and not isinstance(v, bool):
            if "step" in k or "iteration" in k:
                out.add("step")
        if k and not isinstance(v, torch.Tensor) and any(w in k for w in ("batch", "position", "sampler")):
            out.add("sampler.position")

    def _tensor(self, t: torch.Tensor, key: Optional[str], out: Set[str]) -> None:
        if t.dtype == torch.uint8 and t.dim() == 1:
            if tuple(t.shape) == tuple(self._rng.shape):
                out.add("rng.torch")
                return
            if self._cuda_shape is not None and tuple(t.shape) == self._cuda_shape:
                out.add("rng.cuda")
                return
        if isinstance(key, str):
            name = key[len("module."):] if key.startswith("module.") else key
            name = self.first_name.get(name, name)
            live = self._live.get(name)
            if live is not None and same_bits(live, t):  # NaN-aware: a diverged run's weights are still found
                out.add(("buffer:" if name in self.buffer_names else "param:") + name)
