"""The order in which the DataLoader actually drew dataset indices: the sampler instance's class is swapped for a
subclass whose __iter__ opens a pass (Draws) and appends every index it yields to it; batch k of a pass then takes
the pass's next len(batch) indices.

A pass is kept apart from the next because loaders are not always drained in turn: a peek at the first batch
(`next(iter(loader))`, PyTorch's DDP tutorial does it every epoch) opens a pass that is abandoned, and its batch,
dropped as never trained on, must not take its indices from the pass that follows."""
from __future__ import annotations

import collections
from typing import Any, Deque, Dict, List, Optional

_STREAM = "_ddp_profile_stream"
_SUBCLASSES: Dict[type, type] = {}
_KEPT_PASSES = 4  # a pass older than this many later ones is abandoned for good


class Pass:
    """One __iter__ of a sampler: what it yielded, in order, and the sampler's own epoch when it began (the epoch a
    DistributedSampler's permutation used, whatever set_epoch does while the pass runs)."""

    def __init__(self, number: int, epoch: Optional[int]) -> None:
        self.number, self.epoch = number, epoch
        self.drawn: Deque[Any] = collections.deque()


class Draws:
    """A sampler's passes, the latest last."""

    def __init__(self) -> None:
        self.passes: Deque[Pass] = collections.deque(maxlen=_KEPT_PASSES)
        self.opened = 0

    def open(self, epoch: Any) -> Pass:
        self.opened += 1
        p = Pass(self.opened, epoch if isinstance(epoch, int) else None)
        self.passes.append(p)
        return p

    def get(self, number: Optional[int] = None) -> Optional[Pass]:
        """Pass `number`, or the latest when None (a loader drained in turn)."""
        if number is None:
            return self.passes[-1] if self.passes else None
        return next((p for p in self.passes if p.number == number), None)


def _recording(cls: type) -> type:
    sub = _SUBCLASSES.get(cls)
    if sub is None:
        base_iter = cls.__iter__  # type: ignore[attr-defined]

        def __iter__(self: Any) -> Any:
            drawn = getattr(self, _STREAM).open(getattr(self, "epoch", None)).drawn
            for i in base_iter(self):
                drawn.append(i)
                yield i

        def __reduce_ex__(self: Any, protocol: Any) -> Any:  # pickles as the user's own class
            state = dict(self.__dict__)
            state.pop(_STREAM, None)
            return (_rebuild, (cls, state))

        sub = type(cls.__name__, (cls,), {"__iter__": __iter__, "__reduce_ex__": __reduce_ex__,
                                          "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        _SUBCLASSES[cls] = sub
    return sub


def _rebuild(cls: type, state: Dict[str, Any]) -> Any:
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


def record(sampler: Any) -> Optional[Draws]:
    """Start recording a sampler's draws; returns them (None when the sampler cannot be wrapped)."""
    if sampler is None:
        return None
    s = getattr(sampler, _STREAM, None)
    if s is not None:
        return s
    try:
        draws = Draws()
        setattr(sampler, _STREAM, draws)
        sampler.__class__ = _recording(type(sampler))
        return draws
    except (TypeError, AttributeError):
        return None


def own_batch_sampler(loader: Any) -> Any:
    """The loader's batch sampler when it decides the batches itself rather than cutting its sampler's draws in
    order (accelerate's BatchSamplerShard hands each rank every world-th batch; a user's bucketing sampler): then its
    batches are what is recorded. None for torch's BatchSampler over the loader's sampler."""
    from torch.utils.data import BatchSampler

    bs = getattr(loader, "batch_sampler", None)
    if bs is None or (type(bs) is BatchSampler and getattr(bs, "sampler", None) is getattr(loader, "sampler", None)):
        return None
    return bs


def record_loader(loader: Any, sampler: Any = None) -> Optional[Draws]:
    """What a loader draws: its own batch sampler's batches, else the given sampler's (or the loader's) indices."""
    bs = own_batch_sampler(loader) if sampler is None else None
    return record(bs if bs is not None else (sampler if sampler is not None else getattr(loader, "sampler", None)))


def take(draws: Optional[Draws], n: int, number: Optional[int] = None) -> List[Any]:
    """The next batch's indices from pass `number` (the latest when None): its next n indices, or its next whole
    batch when a batch sampler was recorded."""
    p = draws.get(number) if draws is not None else None
    return _take(p.drawn, n) if p is not None else []


def pass_epoch(draws: Optional[Draws], number: Optional[int] = None) -> Optional[int]:
    p = draws.get(number) if draws is not None else None
    return p.epoch if p is not None else None


def _take(stream: Deque[Any], n: int) -> List[Any]:
    if stream and isinstance(stream[0], (list, tuple)):
        whole = stream.popleft()
        return _take(collections.deque(whole), len(whole))
    out: List[Any] = []
    while stream and len(out) < n:
        i = stream.popleft()
        try:
            out.append(int(i))
        except (TypeError, ValueError):
            out.append(i if isinstance(i, (str, float)) else str(i))
    return out


def first_tensors(batch: Any) -> List[Any]:
    """batch[0], batch[1] of a tuple/list, the first two tensor values of a dict, or the batch itself."""
    import torch

    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [v for v in batch.values() if isinstance(v, torch.Tensor)][:2]
    if isinstance(batch, (tuple, list)):
        return [v for v in batch[:2] if isinstance(v, torch.Tensor)]
    return []


def batch_len(batch: Any) -> int:
    ts = first_tensors(batch)
    if ts and ts[0].dim() > 0:
        return int(ts[0].shape[0])
    try:
        return len(batch[0]) if isinstance(batch, (tuple, list)) else len(batch)
    except TypeError:
        return 0


def sampler_info(sampler: Any, loader: Any) -> Dict[str, Any]:
    from torch.utils.data import DistributedSampler, RandomSampler

    if sampler is None and loader is not None and own_batch_sampler(loader) is not None:
        sampler = own_batch_sampler(loader)  # it, not the loader's unused default sampler, decides the batches
    size = None
    for src in (sampler, loader):
        ds = getattr(src, "dataset", None) if src is not None else None
        if ds is not None:
            try:
                size = len(ds)
                break
            except TypeError:
                pass
    if sampler is None:
        shuffle = None
    elif hasattr(sampler, "shuffle"):
        shuffle = bool(sampler.shuffle)
    else:
        shuffle = isinstance(sampler, RandomSampler)
    return {"class": type(sampler).__name__ if sampler is not None else None,
            "is_distributed": isinstance(sampler, DistributedSampler), "dataset_size": size, "shuffle": shuffle,
            "seed": getattr(sampler, "seed", None), "drop_last": getattr(sampler, "drop_last", None),
            "num_replicas": getattr(sampler, "num_replicas", None), "rank": getattr(sampler, "rank", None)}
