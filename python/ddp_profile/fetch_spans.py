"""A DataLoader batch's fetch, timed in whichever process runs it (a worker, or the training process with
num_workers=0): the dataset's transform / transforms / target_transform callables (wherever a Subset or ConcatDataset
holds them) and the loader's collate_fn are wrapped, the fetcher's fetch collects their intervals, and emit_fetch
turns one fetch into spans: each `transform`, the `collate` less its nested transforms, and the rest as `disk_read`
(file reads, decoding: whatever is not a transform); a Compose's steps are timed by class (in_progress.steps). Where
the spans go is the process's `in_progress.sink`. The fetch's ends are moments (thread_cpu.moment), the timed calls'
are CPU moments (thread_cpu.cpu_moment, no schedstat read): every span of a fetch carries its CPU time, the gaps
between the timed calls (the reads) too, as their ends are the calls', and its share of the fetch's wait for a core.

Part = (stage, start moment, end moment)."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import events, thread_cpu
from .thread_cpu import Moment

_now = time.monotonic_ns
_moment = thread_cpu.moment
_cpu_moment = thread_cpu.cpu_moment
Part = Tuple[str, Moment, Moment]
_TRANSFORM_ATTRS = ("transform", "transforms", "target_transform")


class _Fetch:
    """The intervals of the fetch in progress in this process: transforms and collate, nested calls counted once."""

    def __init__(self) -> None:
        self.parts: Optional[List[Part]] = None
        self.depth = 0
        self.sink: Optional[Callable[[Moment, Moment, List[Part]], None]] = None
        self.steps: Dict[str, int] = {}  # a Compose's steps by class: ns spent in them while fetching, ever



in_progress = _Fetch()  # the fetch this process is running, if any


class _TimedTransform:
    """A dataset's transform, timed while a batch is fetched; otherwise the callable it wraps."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    stage = "transform"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = in_progress  # timed inline: this runs once per sample, on the worker's critical path
        if f.parts is None or f.depth:
            return self.fn(*args, **kwargs)
        f.depth += 1
        m0 = _cpu_moment()
        try:
            return self.fn(*args, **kwargs)
        finally:
            f.parts.append((self.stage, m0, _cpu_moment()))
            f.depth -= 1

    def __getattr__(self, name: str) -> Any:  # Compose's .transforms, a user's attributes
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return repr(self.fn)


class _TimedCollate(_TimedTransform):
    stage = "collate"


class _TimedStep:
    """One step of a Compose (torchvision v1 or v2: a `.transforms` list), its time added to its class's total while a
    batch is fetched: which step of a slow transform costs what."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.name = fn, type(fn).__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f = in_progress
        if f.parts is None:
            return self.fn(*args, **kwargs)
        t0 = _now()
        try:
            return self.fn(*args, **kwargs)
        finally:
            f.steps[self.name] = f.steps.get(self.name, 0) + _now() - t0

    def __getattr__(self, name: str) -> Any:
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return repr(self.fn)


def _time_steps(fn: Any) -> None:
    steps = getattr(fn, "transforms", None)
    if isinstance(steps, list):
        for i, step in enumerate(steps):
            if callable(step) and not isinstance(step, _TimedStep):
                steps[i] = _TimedStep(step)


def _time_transforms(ds: Any, seen: set) -> None:
    """Wraps the transform callables of `ds` and of the datasets it wraps (Subset.dataset, ConcatDataset.datasets)."""
    if ds is None or id(ds) in seen or len(seen) > 64:
        return
    seen.add(id(ds))
    for attr in _TRANSFORM_ATTRS:
        fn = getattr(ds, attr, None)
        if callable(fn) and not isinstance(fn, _TimedTransform):
            _time_steps(fn)
            try:
                setattr(ds, attr, _TimedTransform(fn))
            except Exception:  # noqa: BLE001  (a read-only property: its time stays in disk_read)
                pass
    _time_transforms(getattr(ds, "dataset", None), seen)
    for inner in getattr(ds, "datasets", None) or []:
        _time_transforms(inner, seen)


def _fetch_then_record(original: Callable[..., Any]) -> Callable[..., Any]:
    def fetch(self: Any, index: Any) -> Any:
        sink = in_progress.sink
        if sink is None or in_progress.parts is not None:
            return original(self, index)
        if not getattr(self, "_ddp_profile_timed", False):
            self._ddp_profile_timed = True
            _time_transforms(self.dataset, set())
            if not isinstance(self.collate_fn, _TimedCollate):
                self.collate_fn = _TimedCollate(self.collate_fn)
        in_progress.parts = parts = []
        m0 = _moment()
        ok = False
        try:
            out = original(self, index)
            ok = True
            return out
        finally:
            in_progress.parts = None
            if ok:
                sink(m0, _moment(), parts)
    fetch._ddp_profile = True  # type: ignore[attr-defined]
    return fetch


def patch_fetchers() -> None:
    from torch.utils.data._utils import fetch as f

    for cls in (f._MapDatasetFetcher, f._IterableDatasetFetcher):
        if not getattr(cls.fetch, "_ddp_profile", False):
            cls.fetch = _fetch_then_record(cls.fetch)  # type: ignore[method-assign]


def _subtract(t0: int, t1: int, holes: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    out, at = [], t0
    for h0, h1 in holes:
        if h1 <= at or h0 >= t1:
            continue
        if h0 > at:
            out.append((at, h0))
        at = max(at, h1)
    if at < t1:
        out.append((at, t1))
    return out


def emit_fetch(log: events.EventLog, lane: int, start: Moment, end: Moment, parts: List[Part], item: int, epoch: int,
               step: int = 0) -> None:
    """A batch's fetch as spans: each transform, the collate less its nested transforms, and the rest as disk_read;
    each with its CPU time between the moments at its ends (every end is the fetch's or a timed call's) and its share
    of the fetch's wait for a core (thread_cpu.apportion_wait: the timed calls' moments read no wait)."""
    at = {start.t: start, end.t: end}
    for _, a, b in parts:
        at[a.t], at[b.t] = a, b

    total = thread_cpu.split(start, end)

    def span(stage: str, x: int, y: int) -> Tuple[str, int, int, Optional[Tuple[int, int]]]:
        s = thread_cpu.split(at[x], at[y])
        if s is not None and s[1] < 0:  # its ends are the timed calls' (cpu_moment): its share of the fetch's wait
            s = (s[0], thread_cpu.apportion_wait(total, s[0]))
        return stage, x, y, s

    parts.sort(key=lambda p: p[1].t)
    transforms = [(a.t, b.t) for s, a, b in parts if s == "transform"]
    spans = [span("transform", a, b) for a, b in transforms]
    for s, a, b in parts:
        if s == "collate":
            spans += [span("collate", x, y) for x, y in _subtract(a.t, b.t, transforms)]
    spans += [span("disk_read", x, y) for x, y in _subtract(start.t, end.t, [(a.t, b.t) for _, a, b in parts])]
    log.batch_spans(lane, spans, step, item, epoch)
