"""Whether every rank sees the same dataset: the digest of the items at a few indices, drawn the same on every rank.

A rank-dependent split (random_split without a generator), unseeded synthetic data or a per-rank file list makes the
same index hold different content on different ranks; the sampler's shard rule cannot see that (it is about
indices). Each item is read twice under one fixed seed per index (torch, random, numpy when imported): an item that
still differs between the two reads is drawn at random on every read and is not compared. The job's own RNG streams
are restored afterwards, so the probe changes nothing the training draws. The C++ judge is judge_same_dataset
(runtime/check/judges_data.cpp)."""
from __future__ import annotations

import random
import sys
from typing import Any, Dict, List

import torch

from . import hashing

PROBES = 8
_SEED = 0x5EED


def _tensors(item: Any, out: List[Any]) -> None:
    if isinstance(item, torch.Tensor):
        out.append(item)
    elif isinstance(item, dict):
        for k in sorted(item, key=str):
            _tensors(item[k], out)
    elif isinstance(item, (tuple, list)):
        for x in item:
            _tensors(x, out)
    else:  # labels, strings, arrays: their text
        out.append(torch.frombuffer(bytearray(repr(item).encode()), dtype=torch.uint8) if repr(item) else
                   torch.empty(0, dtype=torch.uint8))


def _digest(item: Any) -> str:
    ts: List[Any] = []
    _tensors(item, ts)
    return hashing.tensors_hash(ts)


def _read_seeded(dataset: Any, i: int) -> str:
    torch.manual_seed(_SEED + i)
    random.seed(_SEED + i)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed((_SEED + i) % (1 << 32))
    return _digest(dataset[i])


def probe(dataset: Any) -> Dict[str, Any]:
    """{"class", "size", "items": [[index, digest], ...], "random_items": [index, ...]} or {"class", "not_probed": why}."""
    cls = type(dataset).__name__
    if dataset is None:
        return {"class": None, "not_probed": "the loader has no dataset"}
    try:
        n = len(dataset)
    except TypeError:
        return {"class": cls, "not_probed": "an iterable dataset has no indices to compare"}
    if n <= 0:
        return {"class": cls, "size": n, "items": [], "random_items": []}
    indices = sorted(set(random.Random(_SEED).sample(range(n), min(PROBES, n))))
    np = sys.modules.get("numpy")
    saved = (random.getstate(), np.random.get_state() if np is not None else None)
    items: List[Any] = []
    varying: List[int] = []
    try:
        with torch.random.fork_rng(devices=[]):
            for i in indices:
                a, b = _read_seeded(dataset, i), _read_seeded(dataset, i)
                if a == b:
                    items.append([i, a])
                else:
                    varying.append(i)
    except Exception as e:  # noqa: BLE001  (a dataset that cannot be read by index here: said, never raised)
        return {"class": cls, "size": n, "not_probed": "reading item by index failed: %s: %s" % (type(e).__name__, e)}
    finally:
        random.setstate(saved[0])
        if np is not None and saved[1] is not None:
            np.random.set_state(saved[1])
    return {"class": cls, "size": n, "items": items, "random_items": varying}
