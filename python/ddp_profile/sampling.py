"""The order in which the DataLoader actually drew dataset indices: the sampler instance's class is swapped for a
subclass whose __iter__ appends every index it yields to a stream; batch k then takes the next len(batch) indices."""
from __future__ import annotations

import collections
from typing import Any, Deque, Dict, List, Optional

_STREAM = "_ddp_profile_stream"
_SUBCLASSES: Dict[type, type] = {}


def _recording(cls: type) -> type:
    sub = _SUBCLASSES.get(cls)
    if sub is None:
        base_iter = cls.__iter__  # type: ignore[attr-defined]

        def __iter__(self: Any) -> Any:
            stream: Deque[Any] = getattr(self, _STREAM)
            stream.clear()  # a new pass: what the last one drew but never batched (drop_last) is dropped
            for i in base_iter(self):
                stream.append(i)
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


def record(sampler: Any) -> Optional[Deque[Any]]:
    """Start recording a sampler's draws; returns its stream (None when the sampler cannot be wrapped)."""
    if sampler is None:
        return None
    s = getattr(sampler, _STREAM, None)
    if s is not None:
        return s
    try:
        stream: Deque[Any] = collections.deque()
        setattr(sampler, _STREAM, stream)
        sampler.__class__ = _recording(type(sampler))
        return stream
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


def record_loader(loader: Any, sampler: Any = None) -> Optional[Deque[Any]]:
    """What a loader draws: its own batch sampler's batches, else the given sampler's (or the loader's) indices."""
    bs = own_batch_sampler(loader) if sampler is None else None
    return record(bs if bs is not None else (sampler if sampler is not None else getattr(loader, "sampler", None)))


def take(stream: Optional[Deque[Any]], n: int) -> List[Any]:
    """The next batch's indices: the next n of a sampler's stream, or the next whole batch of a batch sampler's."""
    if stream and isinstance(stream[0], (list, tuple)):
        whole = stream.popleft()
        return take(collections.deque(whole), len(whole))
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
