"""Whether the job learns, one line per optimizer step (check mode): verify/rank<R>.training.jsonl.

Python records, C++ judges (runtime/check/judges_training.cpp, judges_memory.cpp). A line holds what a step showed:
- the parameters whose synced gradient is exactly zero, non-finite, or absent (one norm per parameter, torch's
  _foreach_norm: one pass over the gradients);
- whether the forward output was finite, and on the first non-finite one the first layer whose output is not
  (the forward run again on a copy, from the same input and RNG state: the step itself is not disturbed);
- the modules a training forward (grad enabled) ran in eval mode, and whether the model itself was in train mode;
- the learning rate of each param_group and the scheduler's own step count (last_epoch): how often it stepped;
- in verified steps, the parameters the optimizer step left unchanged;
- the set of trained parameters: those that received a gradient DDP does not reduce (not among those its reducer
  holds: a layer replaced or added after DDP(...), or one frozen when DDP was built and unfrozen since), and those
  that received one and are in no param_group of the optimizer (unfrozen after it was built without them);
- memory: the bytes the C heap has handed out and not had back (glibc's mallinfo2: what tensors, graphs and buffers
  hold, blind to the pages an allocator keeps after a free), the process's resident set, and on CUDA the caching
  allocator's allocated/reserved bytes.
The parameters that require grad but are in no optimizer param_group are named once, in the companion's meta.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn

from . import files
from .ground import copy_without_hooks, innermost_optimizer, leaves, live_objects, own
from .hashing import same_bits
from .iteration import Iteration
from .tensor_census import Census

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# Modules whose forward differs between train and eval mode: what a forgotten model.train() changes.
_MODE_SENSITIVE = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)


def resident_bytes() -> int:
    """What the process really holds: its resident set (/proc/self/statm), 0 where there is none."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2() -> Any:
    try:
        f = ctypes.CDLL(None).mallinfo2  # glibc >= 2.33; absent under musl
    except (OSError, AttributeError):
        return None
    f.restype, f.argtypes = _Mallinfo2, []
    return f


_MALLINFO2 = _mallinfo2()


def heap_in_use() -> Optional[int]:
    """Bytes malloc has handed out and not had back, over every arena (uordblks) and its own mmaps (hblkhd): a
    tensor's storage, an autograd node, a buffer. Unlike the resident set it does not move when an allocator keeps
    or returns freed pages, so a steady job is flat to the byte. None without glibc's mallinfo2, or when another
    allocator (jemalloc, tcmalloc preloaded) serves malloc and glibc's heap stays empty."""
    if _MALLINFO2 is None:
        return None
    m = _MALLINFO2()
    used = int(m.uordblks) + int(m.hblkhd)
    return used if used > 0 else None


def ungrouped(named: List[Tuple[str, Any]], optimizer: Any) -> List[str]:
    """The names among `named` (name, parameter) in no param_group of any optimizer: the one given to attach, or
    another the script steps too (one gc walk, only when the given one lacks some)."""
    grouped = {id(p) for g in optimizer.param_groups for p in g["params"]}
    named = [(n, p) for n, p in named if id(p) not in grouped]
    if named:
        others = {id(p) for o in live_objects((torch.optim.Optimizer,)) for g in o.param_groups for p in g["params"]}
        named = [(n, p) for n, p in named if id(p) not in others]
    return [n for n, _ in named]


def outside_optimizer(module: nn.Module, optimizer: Any) -> List[str]:
    """Parameters that require grad and are in no optimizer's param_group: never updated, their gradients never
    zeroed."""
    return ungrouped([(n, p) for n, p in module.named_parameters() if p.requires_grad], optimizer)


def find_scheduler(optimizer: Any) -> Any:
    """The learning-rate scheduler driving `optimizer` when the script did not hand it to attach (one gc walk); it may
    have been built on a wrapper of it (the Hugging Face Trainer builds its schedule on accelerate's optimizer)."""
    kinds = tuple(k for k in (getattr(torch.optim.lr_scheduler, "LRScheduler", None),
                              getattr(torch.optim.lr_scheduler, "_LRScheduler", None),
                              getattr(torch.optim.lr_scheduler, "ReduceLROnPlateau", None)) if k is not None)
    inner = innermost_optimizer(optimizer)
    return next((o for o in live_objects(kinds) if innermost_optimizer(getattr(o, "optimizer", None)) is inner), None)


def _first_tensor(out: Any) -> Optional[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    elif hasattr(out, "logits") and isinstance(getattr(out, "logits"), torch.Tensor):
        return out.logits
    if isinstance(out, (tuple, list)):
        for x in out:
            if isinstance(x, torch.Tensor):
                return x
    return None


def _finite(t: Optional[torch.Tensor]) -> bool:
    if t is None or not t.is_floating_point() or t.numel() == 0:
        return True
    return bool(torch.isfinite(t.detach().sum(dtype=torch.float64)))  # one reduction; NaN or inf anywhere shows


class Registered:
    """What DDP reduces, as it registered it when it wrapped the module: `reduced`, the ids of the parameters its
    reducer holds (with those it was told to ignore: never reduced by design), and `wrapped`, the ids of every
    parameter the module held then. A parameter in `wrapped` but not `reduced` required no grad then: frozen when
    DDP was built, so no hook of DDP's ever averages its gradient, whatever requires_grad says later."""

    def __init__(self, reduced: set, wrapped: set) -> None:
        self.reduced, self.wrapped = reduced, wrapped


def ddp_registered(model: Any) -> Optional[Registered]:
    """The model's Registered (torch >= 2.0 keeps the lists), or None when the model is no DDP or keeps none."""
    params = getattr(model, "_module_parameters", None)
    if params is None:
        return None
    ignored = getattr(model, "parameters_to_ignore", ()) or ()
    inner = getattr(model, "module", None)
    named = dict(inner.named_parameters()) if inner is not None else {}
    # DDP's reducer holds the parameters that required grad when it was built (its buckets could say so exactly, but
    # only through a copy of every gradient's bytes: on a large model, memory a check must not take). The companion
    # attaches right after DDP(...) or at its first forward, before a schedule unfreezes anything: what requires grad
    # now is what the reducer holds.
    reduced = {id(p) for p in params if p.requires_grad}
    return Registered(reduced | {id(named[n]) for n in ignored if n in named}, {id(p) for p in params})


class Training:
    def __init__(self, module: nn.Module, optimizer: Any, scheduler: Any, out: files.Jsonl,
                 registered: Optional[Registered] = None) -> None:
        self.module, self.optimizer, self.scheduler, self.out = module, optimizer, scheduler, out
        self.registered = registered
        self.params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.mode_modules = [("%s (%s)" % (n, type(m).__name__) if n else type(m).__name__, m)
                             for n, m in module.named_modules() if isinstance(m, _MODE_SENSITIVE)]
        self.searched_scheduler = scheduler is not None
        self.output_finite = True
        self.eval_modules: List[str] = []
        self.model_in_eval = False
        self.training_forwards = 0
        self.localized: Optional[Dict[str, Any]] = None  # the first non-finite layer, once
        self.localized_written = False
        self._rng: Any = None
        self._grads: Dict[str, Any] = {}
        self.iteration = Iteration([p for _, p in self.params])
        self.census: Optional[Census] = None  # the live tensors at some step boundaries (check mode sets it)

    # -- forward ------------------------------------------------------------------------------------------------------
    def forward_pre(self) -> None:
        if not torch.is_grad_enabled():  # a validation forward: not part of training
            return
        self.training_forwards += 1
        self.iteration.forward()
        self.model_in_eval |= not self.module.training
        for n, m in self.mode_modules:
            if not m.training and n not in self.eval_modules:
                self.eval_modules.append(n)
        if self.localized is None and self.output_finite:
            self._rng = own(torch.get_rng_state())

    def forward_post(self, args: Any, kwargs: Any, out: Any) -> None:
        if not torch.is_grad_enabled() or not self.output_finite:
            return
        if not _finite(_first_tensor(out)):
            self.output_finite = False
            if self.localized is None:
                self.localized = self._first_nonfinite_layer(args, kwargs)

    def _first_nonfinite_layer(self, args: Any, kwargs: Any) -> Dict[str, Any]:
        """The forward again on a copy of the module, from the same input and RNG state: the first leaf module whose
        output is not finite (forward order)."""
        found: List[str] = []
        try:
            copy = copy_without_hooks(self.module)
            hooks = []
            for name, leaf in leaves(copy):
                def hook(m: Any, i: Any, o: Any, name: str = name) -> None:
                    if not found and isinstance(o, torch.Tensor) and not _finite(o):
                        found.append("%s (%s)" % (name, type(m).__name__))
                hooks.append(leaf.register_forward_hook(hook))
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                if self._rng is not None:
                    torch.set_rng_state(self._rng)
                copy(*args, **(kwargs or {}))
            for h in hooks:
                h.remove()
        except Exception as e:  # noqa: BLE001  (the copy's forward may not run outside DDP: said, not raised)
            return {"layer": None, "error": "%s: %s" % (type(e).__name__, e)}
        return {"layer": found[0] if found else None}

    # -- the optimizer step ------------------------------------------------------------------------------------------
    def before_step(self) -> None:
        self.iteration.before_update()
        with_grad = [(n, p.grad) for n, p in self.params if p.grad is not None]
        norms: List[float] = []
        if with_grad:  # float32 norms: a float16 gradient's norm overflows float16 long before its elements do
            grads = [g.detach() for _, g in with_grad]
            try:
                per_grad = torch._foreach_norm(grads, 2, dtype=torch.float32)
            except TypeError:  # torch < 2.1: no dtype; the norms in float32 one by one
                per_grad = [g.float().norm() for g in grads]
            norms = torch.stack(list(per_grad)).cpu().tolist()
        # A float32 norm overflows for finite elements beyond ~1e19: a non-finite norm is looked at element by element.
        nonfinite = [n for (n, g), v in zip(with_grad, norms)
                     if (v != v or v in (float("inf"), float("-inf"))) and not bool(torch.isfinite(g).all())]
        self._grads = {
            "grad_zero": [n for (n, _), v in zip(with_grad, norms) if v == 0.0],
            "grad_nonfinite": nonfinite,
            "grad_none": [n for n, p in self.params if p.grad is None],
        }

    def _trained_set(self) -> Dict[str, List[str]]:
        """The set of trained parameters, at this step: those that received a gradient, against those DDP reduces
        (outside_ddp; frozen_at_wrap the ones that were frozen when DDP was built) and those an optimizer steps
        (outside_optimizer: requires_grad set again after the optimizer was built without them, or a layer added)."""
        got = [(n, p) for n, p in self.module.named_parameters() if p.grad is not None]
        out: Dict[str, List[str]] = {}
        if self.registered is not None:
            outside = [(n, p) for n, p in got if id(p) not in self.registered.reduced]
            out["outside_ddp"] = [n for n, _ in outside]
            out["frozen_at_wrap"] = [n for n, p in outside if id(p) in self.registered.wrapped]
        out["outside_optimizer"] = ungrouped([(n, p) for n, p in got if p.requires_grad], self.optimizer)
        return out

    def after_step(self, step: int, before: Optional[Dict[str, torch.Tensor]]) -> None:
        if not self.searched_scheduler:
            self.scheduler, self.searched_scheduler = find_scheduler(self.optimizer), True
        line: Dict[str, Any] = {
            "step": step, "params": len(self.params), "forwards": self.training_forwards, "output_finite": self.output_finite,
            "model_in_eval": self.model_in_eval, "eval_modules": self.eval_modules,
            "lrs": [float(g.get("lr", 0.0)) for g in self.optimizer.param_groups],
            "scheduler_steps": getattr(self.scheduler, "last_epoch", None) if self.scheduler is not None else None,
            "rss": resident_bytes(),
        }
        heap = heap_in_use()
        if heap is not None:
            line["heap"] = heap
        if self.census is not None and self.census.due(step):  # after the heap is read: a census allocates
            line["census"] = self.census.take(step)
        line.update(self._grads)
        line.update(self.iteration.step_fields())
        line.update(self._trained_set())
        if before is not None:  # a verified step: its pre-step parameters were dumped
            line["unchanged"] = [n for n, p in self.params if n in before and same_bits(p, before[n])]
        if self.localized is not None and not self.localized_written:
            line["first_nonfinite_layer"] = self.localized
            self.localized_written = True
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            line["cuda_allocated"] = torch.cuda.memory_allocated()
            line["cuda_reserved"] = torch.cuda.memory_reserved()
        self.out.write(line)
        self.eval_modules, self.model_in_eval, self.training_forwards, self._grads = [], False, 0, {}
