"""The helpers the companion's modules share, on the ground floor: they import nothing of the package but layout, so
every other module imports them at the top and the package has no import cycle (attach -> check -> numerics,
training -> ground; auto -> attach; frameworks -> ground)."""
from __future__ import annotations

import copy
import gc
import warnings
import weakref
from typing import Any, Dict, List, Tuple

import torch
import torch.nn as nn


# The tensors the companion itself keeps (RNG states it compares, ...): a census of the live tensors leaves them out.
OWN: "weakref.WeakSet[torch.Tensor]" = weakref.WeakSet()


def own(obj: Any) -> Any:
    """`obj` (a tensor, or tensors in dicts, lists and tuples) marked as the companion's own; returned as it is."""
    if isinstance(obj, torch.Tensor):
        OWN.add(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            own(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            own(v)
    return obj


def _class_names(obj: Any) -> set:
    return {c.__module__.split(".")[0] + "." + c.__name__ for c in type(obj).__mro__}


def is_lightning(module: nn.Module) -> bool:
    """A LightningModule, recognised by its classes (the package is never imported here)."""
    names = _class_names(module)
    return "lightning.LightningModule" in names or "pytorch_lightning.LightningModule" in names


def innermost_optimizer(opt: Any) -> Any:
    """accelerate's AcceleratedOptimizer (and Lightning's wrappers) hold the real one as .optimizer."""
    seen = 0
    while isinstance(getattr(opt, "optimizer", None), torch.optim.Optimizer) and seen < 8:
        opt, seen = opt.optimizer, seen + 1
    return opt


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside DDP (and inside Lightning's wrapper, whose forward redirects to training_step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    m = model.module if isinstance(model, DDP) else model
    inner = getattr(m, "_forward_module", None)
    return inner if isinstance(inner, nn.Module) else m


def storage_of(t: torch.Tensor) -> Tuple[int, int]:
    """(address, bytes) of the storage a tensor's elements live in; (0, 0) for a tensor subclass without one."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()  # torch < 2.0: typed
        return s.data_ptr(), s.nbytes()
    except (RuntimeError, NotImplementedError):
        return 0, 0


def _held_at(t: torch.Tensor) -> Any:
    """Where a tensor's elements live: two names with the same place hold one tensor (a head tied to the embedding,
    or weights whose .data was made one). A tensor with no elements (or no storage: meta) is its own place."""
    ptr = storage_of(t)[0]
    if ptr == 0 or t.numel() == 0:
        return id(t)
    return (ptr, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def tied_names(module: nn.Module) -> Dict[str, str]:
    """Each key of the module's state_dict -> the first key (in state_dict order) holding the same tensor. A
    parameter is its storage, not its name: tied weights (the default of most language models: lm_head.weight is
    transformer.wte.weight) are one parameter under two names, trained as one by autograd and stored once by
    safetensors and save_pretrained."""
    first: Dict[Any, str] = {}
    out: Dict[str, str] = {}
    for k, t in module.state_dict(keep_vars=True).items():
        out[k] = first.setdefault(_held_at(t), k) if isinstance(t, torch.Tensor) else k
    return out


def leaves(m: nn.Module) -> List[Any]:
    """(name, module) of every module without children, in registration (forward) order."""
    return [(n, x) for n, x in m.named_modules() if next(iter(x.children()), None) is None]


def copy_memo(module: nn.Module) -> Dict[int, Any]:
    """deepcopy memo entries for a copy of the module: a LightningModule's Trainer (and Fabric) are not copied but
    left out (None), so the copy's training_step cannot log into or step the live Trainer."""
    memo: Dict[int, Any] = {}
    for attr in ("_trainer", "_fabric"):
        v = getattr(module, attr, None) if is_lightning(module) else None
        if v is not None:
            memo[id(v)] = None
    return memo


_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
          "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")


def copy_without_hooks(m: nn.Module) -> nn.Module:
    """A deep copy of the module whose hook tables are empty (the live ones hold the companion's own hooks), without
    the framework objects it points back to (a LightningModule's Trainer)."""
    memo = copy_memo(m)
    for sub in m.modules():
        for attr in _HOOKS:
            d = getattr(sub, attr, None)
            if d is not None:
                memo[id(d)] = type(d)()
    return copy.deepcopy(m, memo)


def live_objects(kinds: Tuple[type, ...]) -> List[Any]:
    """The objects of these classes the collector tracks (one walk of the heap), asked their class without the
    warnings or errors some objects give (torch's deprecated module aliases)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            try:
                if isinstance(o, kinds):
                    out.append(o)
            except Exception:  # noqa: BLE001
                continue
    return out


def to_device(obj: Any, device: Any) -> Any:
    """A batch (tensors in tuples, lists and dicts) detached and moved, the rest as it is."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(v, device) for v in obj)
    return obj


def dropouts(m: nn.Module) -> List[nn.Module]:
    return [x for x in m.modules() if isinstance(x, nn.modules.dropout._DropoutNd)]
