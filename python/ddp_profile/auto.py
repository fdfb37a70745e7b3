"""The companion with no line in the script. Installed right after `torch` is imported in every process of a job
ddp_profile runs (site_entry.py), it patches the places where a data-parallel job shows itself and attaches the
companion at the DDP model's first training forward:

- DistributedDataParallel.__init__: the model. Nothing happens until its first forward in train mode with grad on
  (a validation pass before training, Lightning's sanity check, is not training).
- the optimizer: at that forward, the live torch.optim.Optimizer holding most of the model's parameters (the
  innermost one, when a framework wraps it); its scheduler and GradScaler likewise.
- DataLoader.__iter__ (and every subclass's own): the batches as the outermost loader yields them. A framework may
  fetch a batch ahead (Lightning, accelerate), so a batch is the step's when a training forward takes it: the
  fetched batch whose first tensor the forward's input equals, else the oldest one fetched. The training loader is
  the one the first trained batch came from.
- torch.save: a save holding the model's weights is a checkpoint (what dp.save records).
- the loss: none is known for a plain script (numerics.reference says how to give one); Lightning's training_step
  is one.
A script that calls ddp_profile.attach gets this same companion, built at its call with what it hands over
(attach_explicit); everything else is still found here. A loader the script iterates through dp.loader is left to
dp.loader, and dp.save writes past the patched torch.save: nothing is recorded twice."""
from __future__ import annotations

import collections
import functools
import os
import sys
import weakref
from typing import Any, Deque, List, Optional

import torch

from . import clipping, env, files, frameworks
from . import heartbeat as hb
from .checkpoint_items import Items
from .companion import Companion, current
from .ground import innermost_optimizer, live_objects
from .loader_spans import LoaderSpans, Pass
from .sampling import first_tensors, record_loader
from .training import find_scheduler

_MAX_QUEUED = 64  # batches fetched and not yet trained on; older ones are dropped (their indices taken off)


class _Iteration:
    """One pass over a loader: its batches are numbered from 0; its epoch is the companion's when first trained."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.epoch: Optional[int] = None
        self.fetched = 0
        self.draw_pass: Optional[int] = None  # the sampler's pass its batches come from (sampling.Draws)


class _Fetched:
    def __init__(self, it: _Iteration, batch: Any, index: int) -> None:
        self.it, self.batch, self.index = it, batch, index


class _Iter:
    """The iterator the outermost loader's __iter__ returns: its own, each batch noted as it is fetched."""

    def __init__(self, auto: "Auto", loader: Any, inner: Any, recorded: Optional[Pass] = None) -> None:
        self._auto, self._inner, self._it, self._pass = auto, inner, _Iteration(loader), recorded

    def __iter__(self) -> "_Iter":
        return self

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __next__(self) -> Any:
        a = self._auto
        a.depth += 1  # a loader iterated inside this one (accelerate's shard wraps torch's) is not recorded twice
        try:
            a.waiting_for_data(self._it)
            if self._pass is not None and a.loader_spans is not None:
                batch = a.loader_spans.next_batch(self._pass, self._inner, functools.partial(next, self._inner))
            else:
                batch = next(self._inner)
        except StopIteration:
            a.exhausted(self._it)
            raise
        finally:
            a.depth -= 1
        a.fetched(self._it, batch)
        return batch


def _first_tensor(args: Any, kwargs: Any) -> Optional[torch.Tensor]:
    todo: List[Any] = [args, kwargs]
    while todo:
        v = todo.pop(0)
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(v, dict):
            todo[0:0] = list(v.values())
        elif isinstance(v, (tuple, list)):
            todo[0:0] = list(v)
    return None


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and bool(torch.equal(a, b))


class Auto:
    def __init__(self, cfg: env.Config) -> None:
        self.cfg = cfg
        self.depth = 0
        self.queue: Deque[_Fetched] = collections.deque()
        self.train_loader: Any = None
        self.first_hooks: List[Any] = []
        self.models: List[Any] = []  # weak references to the DDP models built and not yet trained
        self.said: set = set()
        self.buffer_path: Optional[str] = None  # where the bytes of a save into a buffer go (Lightning's writer)
        self.writing_directory = False  # inside accelerate's save_state: its files are one checkpoint, not several
        # --record: the data path of every loader pass, per worker (loader_spans.py); made at the first pass, so a
        # process that never iterates a loader (torchrun's agent) writes nothing
        self.loader_spans: Optional[LoaderSpans] = None

    # -- loaders ----------------------------------------------------------------------------------------------------
    def iterate(self, loader: Any, start: Any) -> Any:
        """`start()` is the loader's own __iter__: a pass of the outermost loader is recorded."""
        c = current()
        if not self.cfg.check and self.loader_spans is None:
            self.loader_spans = LoaderSpans(self.cfg.run, env.rank_world()[0],
                                            lambda: getattr(current(), "steps", 0))
        own = c is not None and loader in c.own_loaders  # dp.loader: the script named its training loader
        if self.depth > 0 or (own and self.loader_spans is None):
            return start()
        if self.cfg.check:
            record_loader(loader)  # before the pass creates its samplers' iterators
        if self.loader_spans is not None:
            inner, p = self.loader_spans.start_pass(loader, start)
            if own:
                self.loader_spans.training_loader(loader)
            return _Iter(self, loader, inner, p)
        return _Iter(self, loader, start())

    def waiting_for_data(self, it: _Iteration) -> None:
        c = current()
        if c is not None and it.loader is self.train_loader:
            c.hb.stage(hb.WAIT_DATA)

    def fetched(self, it: _Iteration, batch: Any) -> None:
        c = current()
        if c is not None and len(c.own_loaders) > 0:
            return  # the training batches come through dp.loader: another loader's are not the training's
        if self.train_loader is not None and it.loader is not self.train_loader:
            return  # a validation loader's batch: not the training's data
        if it.fetched == 0:  # its sampler's pass has opened by now, and is the latest
            draws = record_loader(it.loader) if self.cfg.check else None
            it.draw_pass = draws.opened if draws is not None else None
        self.queue.append(_Fetched(it, batch, it.fetched))
        it.fetched += 1
        while len(self.queue) > _MAX_QUEUED:
            self._drop(self.queue.popleft())

    def exhausted(self, it: _Iteration) -> None:
        c = current()
        if c is not None and it.loader is self.train_loader:
            c.in_epoch = False

    def _drop(self, e: _Fetched) -> None:
        """A batch fetched and never trained on (a resume skipping ahead, a framework's look-ahead at the end)."""
        c = current()
        if c is not None and e.it.loader is self.train_loader:
            c.recorder.drop_batch(e.batch, e.it.draw_pass)

    def _consume(self, args: Any, kwargs: Any) -> None:
        """The batch this training forward takes: recorded as dp.loader records a yielded batch."""
        c = current()
        if c is None or len(c.own_loaders) > 0:  # the script hands its training batches over through dp.loader
            return
        if self.train_loader is None:
            if not self.queue:
                return
            self.train_loader = self.queue[-1].it.loader
            c.adopt_loader(self.train_loader)
            if self.loader_spans is not None:
                self.loader_spans.training_loader(self.train_loader)
        mine = [e for e in self.queue if e.it.loader is self.train_loader]
        if not mine:
            return
        x = _first_tensor(args, kwargs)
        # The batch whose tensor the forward was given, else one equal to it: a peek at the first batch
        # (`next(iter(loader))`) queues a batch equal to the one the next pass trains on, and is not it.
        pick = next((e for e in mine if x is not None and any(x is t for t in first_tensors(e.batch))), None)
        if pick is None:
            pick = next((e for e in mine if x is not None and any(_same_tensor(x, t) for t in first_tensors(e.batch))),
                        mine[0])
        while self.queue:
            e = self.queue.popleft()
            if e is pick:
                break
            self._drop(e)
        it = pick.it
        if it.epoch is None:
            it.epoch = c.begin_epoch(it.loader)
        c.in_epoch = True
        c.on_batch(pick.batch, it.epoch, pick.index, it.draw_pass)
        c.batch_in_epoch = pick.index + 1

    # -- the model --------------------------------------------------------------------------------------------------
    def on_ddp(self, ddp: torch.nn.Module) -> None:
        if current() is None:
            self.models.append(weakref.ref(ddp))
            self.first_hooks.append(ddp.register_forward_pre_hook(self._first_forward, with_kwargs=True))

    def guarded(self, f: Any, *args: Any) -> Any:
        """The companion never ends the user's job: a failure of its own is said once and it stays off."""
        try:
            return f(*args)
        except Exception as e:  # noqa: BLE001
            self._remove_first_hooks()
            self._say_once("the companion failed and is off for this process: %s: %s" % (type(e).__name__, e))
            return None

    def _first_forward(self, model: torch.nn.Module, args: Any, kwargs: Any) -> None:
        self.guarded(self._attach_at_first_forward, model, args, kwargs)

    def first_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        """torch's global optimizer step pre-hook: an optimizer.step(closure) runs the forward inside the step
        (Lightning's does), so the companion must be there before it."""
        if current() is None and self.models:
            self.guarded(self._attach_at_first_step, opt)

    def _attach_at_first_step(self, opt: Any) -> None:
        params = {id(p) for g in opt.param_groups for p in g["params"]}
        for ref in self.models:
            model = ref()
            if model is not None and model.training and any(id(p) in params for p in model.parameters()):
                self._attach(model, opt, live_objects(_scaler_classes()) if _scaler_classes() else [])
                return

    def _attach_at_first_forward(self, model: torch.nn.Module, args: Any, kwargs: Any) -> None:
        if current() is not None:
            self._remove_first_hooks()
            return
        if not (model.training and torch.is_grad_enabled()):
            return
        objects = live_objects((torch.optim.Optimizer, *_scaler_classes()))  # once, at the first training forward
        opt = find_optimizer(model, objects)
        if opt is None:
            self._say_once("no optimizer holds the DDP model's parameters at its first training forward: "
                           "not attached yet")
            return
        self._attach(model, opt, objects)
        self._training_forward(model, args, kwargs)
        c = current()
        if c is not None:
            c._forward_pre(model, args)  # its own pre-hook was registered during this forward: it runs from the next

    def _attach(self, model: torch.nn.Module, opt: Any, objects: List[Any]) -> None:
        self.build(model, opt, None, None, None, find_scaler(objects), frameworks.which(model))

    def build(self, model: torch.nn.Module, opt: Any, loss_fn: Any, sampler: Any, scheduler: Any, scaler: Any,
              found_by: str) -> Companion:
        """The companion, with what was handed over and the rest found: the loss from the framework, the
        scheduler driving the optimizer. From now the training forwards take the fetched batches."""
        self._remove_first_hooks()
        self.models = []
        c = Companion(self.cfg, model, opt, loss_fn if loss_fn is not None else frameworks.loss_fn(model), sampler,
                      scheduler if scheduler is not None else find_scheduler(opt), scaler, found_by)
        model.register_forward_pre_hook(self._training_forward, prepend=True, with_kwargs=True)
        return c

    def _training_forward(self, model: torch.nn.Module, args: Any, kwargs: Any) -> None:
        if model.training and torch.is_grad_enabled():
            self._consume(args, kwargs)

    def _remove_first_hooks(self) -> None:
        for h in self.first_hooks:
            h.remove()
        self.first_hooks = []

    def _say_once(self, what: str) -> None:
        if what not in self.said:
            self.said.add(what)
            sys.stderr.write("ddp_profile: %s\n" % what)

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def save(self, obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        c = current()
        if c is None or self.writing_directory or not holds_model_weights(obj, c):
            files.original_torch_save()(obj, f, *args, **kwargs)
            return
        c.buffer_path = self.buffer_path
        try:
            c.save(obj, f, *args, **kwargs)
        finally:
            c.buffer_path = None

    def saved_file(self, obj: Any, path: Any) -> None:
        """A file the job wrote itself (safetensors) holding the model's weights: a checkpoint."""
        c = current()
        if c is not None and not self.writing_directory and \
                isinstance(path, (str, os.PathLike)) and holds_model_weights(obj, c):
            c.saved_file(obj, os.fspath(path))

    def before_clip(self) -> None:
        c = current()
        if c is not None:
            c.recorder.before_clip(c.steps)

    def saved_directory(self, path: Any) -> None:
        c = current()
        if c is not None and path is not None:
            c.saved_directory(str(path))


def _scaler_classes() -> tuple:
    return tuple(c for c in (getattr(torch.amp, "GradScaler", None), getattr(torch.cuda.amp, "GradScaler", None))
                 if isinstance(c, type))


def find_optimizer(model: torch.nn.Module, objects: List[Any]) -> Any:
    """The live optimizer holding most of the model's parameters."""
    mine = {id(p) for p in model.parameters()}
    best, best_n = None, 0
    for o in objects:
        if not isinstance(o, torch.optim.Optimizer):
            continue
        o = innermost_optimizer(o)
        n = sum(1 for g in o.param_groups for p in g["params"] if id(p) in mine)
        if n > best_n:
            best, best_n = o, n
    return best


def find_scaler(objects: List[Any]) -> Any:
    return next((o for o in objects if isinstance(o, _scaler_classes()) and o.is_enabled()), None)


def holds_model_weights(obj: Any, comp: Any) -> bool:
    """A save is a checkpoint when it holds the model's parameters (a state_dict, or a dict with one inside)."""
    if obj is None or isinstance(obj, (str, bytes, int, float)):
        return False
    found = Items(comp.module, comp.optimizer, None, None, False).found(obj)
    return any(x.startswith("param:") for x in found)


_auto: Optional[Auto] = None


def install() -> None:
    """Patches torch (once per process) when ddp_profile runs the job; does nothing otherwise."""
    global _auto
    cfg = env.read()
    if cfg is None or _auto is not None:
        return
    env.check_format()
    if not hasattr(torch.optim.Optimizer, "register_step_pre_hook"):
        return  # torch < 2.0: attach() says so when called
    _auto = a = Auto(cfg)
    files.remember_torch_save()
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader

    ddp_init = DDP.__init__

    @functools.wraps(ddp_init)
    def ddp_init_then_watch(self: Any, *args: Any, **kwargs: Any) -> None:
        ddp_init(self, *args, **kwargs)
        a.guarded(a.on_ddp, self)

    DDP.__init__ = ddp_init_then_watch  # type: ignore[method-assign]
    patch_iter(DataLoader)
    original_init_subclass = DataLoader.__dict__.get("__init_subclass__")

    def init_subclass(cls: type, **kw: Any) -> None:  # accelerate's, Lightning's loaders: their own __iter__ too
        if original_init_subclass is not None:
            original_init_subclass.__func__(cls, **kw)
        else:
            super(DataLoader, cls).__init_subclass__(**kw)
        if "__iter__" in cls.__dict__:
            patch_iter(cls)

    DataLoader.__init_subclass__ = classmethod(init_subclass)  # type: ignore[assignment]
    torch.save = a.save  # type: ignore[assignment]
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(a.first_step)
    frameworks.install(a)
    if cfg.check:
        clipping.install(a.before_clip)


def attach_explicit(cfg: env.Config, model: torch.nn.Module, optimizer: Any, loss_fn: Any, sampler: Any,
                    scheduler: Any, scaler: Any) -> Companion:
    """The script's attach(): the companion built now with what it hands over (install() ran first)."""
    a = _auto if _auto is not None else Auto(cfg)
    if scaler is None:
        scaler = find_scaler(live_objects(_scaler_classes())) if _scaler_classes() else None
    return a.build(model, optimizer, loss_fn, sampler, scheduler, scaler, "attach")


def patch_iter(cls: type) -> None:
    own = cls.__dict__["__iter__"]

    @functools.wraps(own)
    def __iter__(self: Any) -> Any:
        return _auto.iterate(self, lambda: own(self)) if _auto is not None else own(self)

    cls.__iter__ = __iter__  # type: ignore[attr-defined]
