"""Leaks as what they are made of (memory.steady, check mode): a census of the live tensors at a step boundary.

What users leak is tensors: a loss accumulated with its graph (`running = running + loss` keeps every step's
autograd graph and the activations it saved), outputs appended to a list, a cache keyed by the step. Bytes are
their symptom, and a heap also grows for reasons that are no leak (a Python-side cache filled once, pages an
allocator keeps). A census counts, in one walk of the objects the collector tracks:
- the live tensors and the bytes of their storages (each storage once: views and tied weights share one);
- the autograd nodes reachable from the live tensors that have a grad_fn (a graph kept alive grows them);
- the containers (list, dict, deque, set) holding the tensors that are new since the census before, by how many
  tensors each holds, and the tensor holding the largest graph, named where they are held (`global running`,
  `Loop.outputs`) once they are seen to grow.
Tensors the companion holds itself are left out (ground.OWN): its bookkeeping is never part of what it measures.

A census costs a walk of the heap (~27 ms at 254 k objects on this machine's cores). The first few after the
verified steps come two steps apart, so that even a short check run has enough to tell growth from warm-up; then at
gaps that double, which cover a run of any length in few censuses, and in between when the censuses so far cost at
most kShare of the time since the first (one step in many on a small model, every few on a large one)."""
from __future__ import annotations

import collections
import gc
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch

from .ground import OWN, storage_of

# The census' share of the training time after its first few, and how many of those come kEarlyGap steps apart.
kShare = 0.02
kEarly = 4
kEarlyGap = 2
# Containers are looked for around kNewLooked of the tensors new since the census before, and the kTopHolders
# holding most tensors are kept; a graph walk stops at kMaxNodes nodes.
kNewLooked = 8
kTopHolders = 3
kMaxNodes = 200_000

_CONTAINERS = (list, dict, collections.deque, set)


def _graph_nodes(roots: List[Any], seen: set) -> int:
    """Autograd nodes reachable from these grad_fns not counted yet (added to `seen`), up to kMaxNodes in all."""
    stack, n = [r for r in roots if r is not None], 0
    while stack and len(seen) < kMaxNodes:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        n += 1
        for nxt, _ in getattr(fn, "next_functions", ()):
            if nxt is not None and nxt not in seen:
                stack.append(nxt)
    return n


def holder_name(obj: Any) -> str:
    """Where `obj` is held: a module's global, an object's attribute, a function's local; "" when none is found."""
    modules = {id(vars(m)): name for name, m in list(sys.modules.items()) if m is not None and hasattr(m, "__dict__")}
    for r in gc.get_referrers(obj):
        if isinstance(r, dict):
            key = next((k for k, v in r.items() if v is obj), None)
            if key is None:
                continue
            if id(r) in modules:
                mod = modules[id(r)]  # a script run by torchrun or runpy may be __mp_main__
                return "global `%s`" % key if mod in ("__main__", "__mp_main__") else "global `%s` of %s" % (key, mod)
            owner = next((o for o in gc.get_referrers(r) if getattr(o, "__dict__", None) is r), None)
            if owner is not None:
                return "`%s.%s`" % (type(owner).__name__, key)
            return "key `%s` of a dict" % key
        if type(r).__name__ == "frame":
            key = next((k for k, v in r.f_locals.items() if v is obj), None)
            if key is not None:
                return "local `%s` of %s()" % (key, r.f_code.co_name)
    return ""


class Census:
    def __init__(self, first_step: int, epoch: Callable[[], int]) -> None:
        # From the first step after the verified ones: their dumps are gone by then.
        self.first_step, self.epoch = first_step, epoch
        self.taken, self.spent, self.last_step, self.next_step = 0, 0.0, -1, first_step
        self.gap = kEarlyGap
        self.since: Optional[float] = None
        self.sizes: Dict[int, int] = {}   # id(holder) -> its count at the census before: growth is seen
        self.names: Dict[int, str] = {}   # id(holder) -> its name, found once it grew
        self.graph_nodes = 0              # the largest graph's at the census before (a new tensor each step holds it)
        self._is_tensor: Dict[type, bool] = {}
        self.ids: set = set()             # the live tensors' ids at the census before: what is new since

    def due(self, step: int) -> bool:
        """The first kEarly censuses kEarlyGap steps apart, then at gaps that double (so that a run of any length is
        covered from its start to its end, in few censuses), and in between whenever the censuses so far cost at
        most kShare of the time since the first."""
        if step < self.first_step:
            return False
        if self.last_step < 0 or step >= self.next_step:
            return True
        return self.taken >= kEarly and self.since is not None and \
            self.spent <= kShare * (time.perf_counter() - self.since)

    def take(self, step: int) -> Dict[str, Any]:
        t0 = time.perf_counter()
        if self.since is None:
            self.since = t0
        out = self._count()
        self.taken, self.last_step = self.taken + 1, step
        if step >= self.next_step:
            if self.taken > kEarly:
                self.gap *= 2
            self.next_step = step + self.gap
        self.spent += time.perf_counter() - t0
        return out

    def _tensor_type(self, t: type) -> bool:
        v = self._is_tensor.get(t)
        if v is None:  # the class, not the object, is asked: no object's __class__ or __getattr__ runs
            v = self._is_tensor[t] = issubclass(t, torch.Tensor)
        return v

    def _count(self) -> Dict[str, Any]:
        own = {id(t) for t in list(OWN)}
        is_tensor, known = self._is_tensor, self._tensor_type
        objs = gc.get_objects()
        tensors = [o for o in objs if (is_tensor.get(type(o)) or (type(o) not in is_tensor and known(type(o))))
                   and id(o) not in own]
        del objs
        storages: Dict[Any, int] = {}
        graphs = []
        for t in tensors:
            ptr, n = storage_of(t)
            storages[ptr or id(t)] = n
            try:
                if t.grad_fn is not None:
                    graphs.append(t)
            except (RuntimeError, AttributeError):  # a tensor subclass that keeps no autograd history of its own
                continue
        seen: set = set()
        biggest, biggest_nodes = None, 0
        for t in graphs:
            n = _graph_nodes([t.grad_fn], seen)
            if n > biggest_nodes:
                biggest, biggest_nodes = t, n
        ids = {id(t) for t in tensors}
        new = [t for t in tensors if id(t) not in self.ids][:kNewLooked]
        holders = self._containers(new, ids, mine={id(tensors), id(graphs), id(new)})
        self.ids = ids
        if biggest is not None:
            holders.append(self._holder("graph", biggest, biggest_nodes))
        return {"epoch": self.epoch(), "tensors": len(tensors), "tensor_bytes": sum(storages.values()),
                "graph_nodes": len(seen), "holders": holders}

    def _containers(self, new: List[torch.Tensor], ids: set, mine: set) -> List[Dict[str, Any]]:
        """The containers holding the tensors that are new since the census before (a few of them: the collector's
        search for referrers compares every reference on the heap with each), by the tensors each holds."""
        if not new:
            return []
        held = []
        for c in gc.get_referrers(*new):
            if type(c) not in _CONTAINERS or id(c) in mine:  # the census' own lists hold them too
                continue
            try:
                n = sum(1 for v in (c.values() if isinstance(c, dict) else c) if id(v) in ids)
            except RuntimeError:  # changed size while counted (another thread): left out of this census
                continue
            held.append((n, c))
        held.sort(key=lambda x: -x[0])
        return [self._holder(type(c).__name__, c, n) for n, c in held[:kTopHolders]]

    def _holder(self, kind: str, obj: Any, count: int) -> Dict[str, Any]:
        key = id(obj)
        if kind == "graph":  # `running = running + loss` holds its graph in a new tensor each step: named afresh
            grew, self.graph_nodes = count > self.graph_nodes > 0, count
            return {"id": key, "kind": kind, "name": holder_name(obj) if grew else "", "count": count}
        grew = count > self.sizes.get(key, count)
        self.sizes[key] = count
        if grew and key not in self.names:
            self.names[key] = holder_name(obj)
        return {"id": key, "kind": kind, "name": self.names.get(key, ""), "count": count}
