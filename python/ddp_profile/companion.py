"""The companion of one process: the moments of a training job (a batch taken, the DDP model's forward, the
optimizer's update and step, a checkpoint, the end) found through hooks on the model and the optimizer, the
heartbeat and the meta written at them, and the mode's recorder (check.py or record.py) told of each.

How it is found does not change what it is: ddp_profile.auto builds it at the DDP model's first training forward
(found_by "auto", "lightning", "accelerate"), ddp_profile.attach when the script calls it (found_by "attach", with
what the script hands it); the loaders' batches and the checkpoints come through ddp_profile.auto either way, or
through dp.loader / dp.save for a script that prefers them."""
from __future__ import annotations

import atexit
import datetime
import os
import platform
import signal
import socket
import sys
import time
import weakref
from typing import Any, Callable, Dict, Iterator, Optional

import torch

from . import env, files, flight_recorder, layout
from . import heartbeat as hb
from .check import CheckRecorder
from .cpu_budget import cpu_budget
from .env import Config
from .ground import unwrap
from .record import ProfileRecorder
from .recorder import Recorder
from .sampling import first_tensors, own_batch_sampler, sampler_info
from .version import __version__


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


class _Loader:
    """dp.loader(l): iterates l's own batches, recording each one (and, per batch, the heartbeat's wait_data)."""

    def __init__(self, comp: "Companion", loader: Any) -> None:
        self._comp, self._loader = comp, loader

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._loader, name)

    def __iter__(self) -> Iterator[Any]:
        c = self._comp
        epoch = c.begin_epoch(self._loader)
        it = iter(self._loader)
        b = 0
        c.in_epoch, c.batch_in_epoch = True, 0
        while True:
            c.hb.stage(hb.WAIT_DATA)
            try:
                batch = next(it)
            except StopIteration:
                break
            c.on_batch(batch, epoch, b)
            c.batch_in_epoch = b = b + 1
            yield batch
        c.in_epoch = False


_current: Optional["Companion"] = None  # one companion per process: attach() and ddp_profile.auto share it


def current() -> Optional["Companion"]:
    return _current


class Companion:
    enabled = True

    def __init__(self, cfg: Config, model: torch.nn.Module, optimizer: Any, loss_fn: Any, sampler: Any,
                 scheduler: Any, scaler: Any, found_by: str) -> None:
        global _current
        _current = self
        self.cfg, self.model, self.optimizer, self.loss_fn = cfg, model, optimizer, loss_fn
        self.sampler, self.scheduler, self.scaler = sampler, scheduler, scaler
        self.found_by = found_by  # "attach" (the script's call), else what ddp_profile.auto found it through
        self.module: torch.nn.Module = unwrap(model)
        self.rank, self.world, self.local_rank = env.rank_world()
        d = torch.distributed
        self.backend = str(d.get_backend()) if d.is_available() and d.is_initialized() else "none"
        self.named_params = list(self.module.named_parameters())
        self.steps = 0            # optimizer steps done in this process
        self.epochs = 0           # loader passes begun
        self.epoch = 0            # the current one, 0-based
        self.batches_in_step = 0  # micro-batches taken since the last optimizer step
        self.forwards_in_step = 0
        self.saves = 0
        self.before_update_done = False
        self.buffer_path: Optional[str] = None  # set by ddp_profile.auto: the file a save into a buffer becomes
        self.failed = False
        self.exited = False
        self.loader_obj: Any = None
        self.own_loaders: "weakref.WeakSet[Any]" = weakref.WeakSet()  # iterated through dp.loader: auto leaves them
        self.in_epoch = False     # inside a pass of the training loader
        self.batch_in_epoch = 0   # batches it has given
        self.first_batch: Optional[Dict[str, Any]] = None
        self.t_step = time.monotonic_ns()
        self.start_time = datetime.datetime.now(datetime.timezone.utc).isoformat()
        os.makedirs(os.path.join(cfg.run, layout.VERIFY_DIR), exist_ok=True)
        self.hb = hb.Heartbeat(cfg.run, self.rank)
        flight_recorder.watch(cfg.run, self.rank)  # a hang's dump, on the supervisor's request
        self.recorder: Recorder = CheckRecorder(self) if cfg.check else ProfileRecorder(self)
        optimizer.register_step_pre_hook(self._step_pre)
        optimizer.register_step_post_hook(self._step_post)
        model.register_forward_pre_hook(self._forward_pre)
        model.register_forward_hook(self._forward_post, with_kwargs=True)
        self._excepthook = sys.excepthook
        sys.excepthook = self._on_exception
        atexit.register(self._at_exit)
        self.write_meta()
        self.hb.set_state(hb.RUNNING)

    def hand(self, loss_fn: Any, sampler: Any, scheduler: Any, scaler: Any) -> None:
        """What a script's attach() hands a companion ddp_profile.auto had already built (attach after the first
        forward): kept where it found nothing itself."""
        if loss_fn is not None and self.loss_fn is None:
            self.loss_fn = loss_fn
            self.recorder.set_loss_fn(loss_fn)
        self.sampler = self.sampler if sampler is None else sampler
        self.scheduler = self.scheduler if scheduler is None else scheduler
        self.scaler = self.scaler if scaler is None else scaler

    # -- the user's calls -------------------------------------------------------------------------------------------
    def loader(self, loader: Any) -> Any:
        self.own_loaders.add(loader)
        self.adopt_loader(loader)
        return _Loader(self, loader)

    def adopt_loader(self, loader: Any) -> None:
        """The training loader: its sampler's draws are followed (ddp_profile.auto calls this for the loader it saw
        the first training batch come from)."""
        if self.loader_obj is None:
            self.loader_obj = loader
        self.recorder.adopt_loader(loader)

    def save(self, obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        self.hb.stage(hb.CHECKPOINT)
        if not isinstance(f, (str, os.PathLike)):
            files.original_torch_save()(obj, f, *args, **kwargs)
            path: Optional[str] = None
        else:
            path = os.fspath(f)
            files.torch_save(obj, path, *args, **kwargs)

        def copy_to(dst: str) -> None:
            if path is not None:
                files.copy(path, dst)
            else:
                files.torch_save(obj, dst)

        self._saved(obj, path if path is not None else self.buffer_path, copy_to)

    def saved_file(self, obj: Any, path: str) -> None:
        """A checkpoint the job wrote itself (a safetensors file): copied as it is."""
        self.hb.stage(hb.CHECKPOINT)
        self._saved(obj, path, lambda dst: files.copy(path, dst))

    def saved_directory(self, path: str) -> None:
        """A checkpoint the job wrote as a directory (accelerate's save_state): read back whole, copied whole."""
        self.hb.stage(hb.CHECKPOINT)
        self._saved(files.load_directory(path) if self.recorder.reads_saved_directory() else None, os.fspath(path),
                    lambda dst: files.copy_tree(path, dst))

    def _saved(self, obj: Any, path: Optional[str], copy_to: Callable[[str], None]) -> None:
        """After the k-th save: the mode records it; then, when the ladder's killed run asked for it, the hold."""
        self.saves += 1
        k = self.saves
        self.recorder.saved(k, obj, path, copy_to)
        if self.cfg.hold_after_save == k:
            sys.stderr.write("ddp_profile: rank %d: holding after save %d\n" % (self.rank, k))
            sys.stderr.flush()
            while True:
                time.sleep(1)

    def load(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        return torch.load(f, *args, **kwargs)

    # -- the loader's side ------------------------------------------------------------------------------------------
    def sampler_in_use(self) -> Any:
        """The sampler the script handed over, else the training loader's own batch sampler or sampler."""
        if self.sampler is not None:
            return self.sampler
        own = own_batch_sampler(self.loader_obj) if self.loader_obj is not None else None
        return own if own is not None else getattr(self.loader_obj, "sampler", None)

    def begin_epoch(self, loader: Any) -> int:
        e = self.epochs
        self.epoch = e
        self.epochs += 1
        self.hb.epoch(e)
        return e

    def on_batch(self, batch: Any, epoch: int, b: int, draw_pass: Optional[int] = None) -> None:
        if self.first_batch is None:
            ts = first_tensors(batch)
            self.first_batch = {k: {"shape": list(t.shape), "dtype": _dtype(t)} for k, t in zip(("x", "y"), ts)}
            self.recorder.first_batch(self.loader_obj)
            self.write_meta()
        self.recorder.on_batch(batch, epoch, b, self.batches_in_step, draw_pass)
        self.batches_in_step += 1

    # -- hooks ------------------------------------------------------------------------------------------------------
    def _forward_pre(self, module: Any, args: Any) -> None:
        self.hb.stage(hb.FORWARD)
        micro = self.forwards_in_step
        self.forwards_in_step += 1
        self.recorder.forward_pre(self.steps, micro)

    def _forward_post(self, module: Any, args: Any, kwargs: Any, out: Any) -> None:
        self.recorder.forward_post(args, kwargs, out)
        self.hb.stage(hb.BACKWARD)

    def _step_pre(self, opt: Any, args: Any, kwargs: Any) -> Any:
        """Before the update. With a closure (Lightning's optimizer.step(closure), LBFGS) the forward and backward
        run inside step(): the moment before the update is after the closure, so the closure is wrapped."""
        closure = kwargs.get("closure") if kwargs else None
        in_kwargs = closure is not None
        if closure is None and args and callable(args[0]):
            closure = args[0]
        self.before_update_done = False
        if closure is None:
            self._before_update()
            return None

        def closure_then_before_update() -> Any:
            loss = closure()
            if not self.before_update_done:  # LBFGS calls it several times: once is the step's
                self._before_update()
            return loss

        if in_kwargs:
            return tuple(args), dict(kwargs, closure=closure_then_before_update)
        return (closure_then_before_update,) + tuple(args[1:]), dict(kwargs or {})

    def _before_update(self) -> None:
        self.before_update_done = True
        self.hb.stage(hb.OPTIMIZER)
        f = self.cfg.fault
        if f is not None and f.rank == self.rank and f.step == self.steps and \
                int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) == 0:
            self._inject(f.kind)
        self.recorder.before_update(self.steps)

    def _inject(self, kind: str) -> None:
        s = self.steps
        self.hb.reason("injected %s at step %d" % (kind, s))
        sys.stderr.write("ddp_profile: rank %d: injecting fault '%s' at step %d\n" % (self.rank, kind, s))
        sys.stderr.flush()
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "throw":
            raise RuntimeError("ddp_profile: injected fault (throw) at step %d" % s)
        while True:  # hang
            time.sleep(1)

    def _step_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        s = self.steps
        self.recorder.after_step(s)
        self.steps = s + 1
        self.batches_in_step = self.forwards_in_step = 0
        now = time.monotonic_ns()
        self.hb.step_time(now - self.t_step)
        self.t_step = now
        self.hb.step(self.steps, self.epoch)

    # -- files ------------------------------------------------------------------------------------------------------
    def write_meta(self, exit_ok: bool = False) -> None:
        p0 = next(iter(self.module.parameters()), None)
        cuda = p0 is not None and p0.device.type == "cuda"
        s, l = self.sampler_in_use(), self.loader_obj
        meta: Dict[str, Any] = {
            "rank": self.rank, "world_size": self.world, "local_rank": self.local_rank, "pid": os.getpid(),
            "host": socket.gethostname(), "launch": {"method": env.launch_method()},
            "backend": self.backend,
            "device": {"type": "cuda" if cuda else "cpu",
                       "name": torch.cuda.get_device_name(p0.device) if cuda and p0 is not None else _cpu_name()},
            "versions": {"torch": torch.__version__, "python": platform.python_version(), "cuda": torch.version.cuda,
                         "companion": __version__},
            "seeds": {"weights": torch.initial_seed(), "data": torch.initial_seed(), "sampler": getattr(s, "seed", None)},
            "config": list(sys.argv), "start_time": self.start_time, "batch": self.first_batch,
            "sampler": sampler_info(s, l),
            "loader": {"batch_size": getattr(l, "batch_size", None), "drop_last": getattr(l, "drop_last", None),
                       "num_workers": getattr(l, "num_workers", None)},
            "model": {"parameters": sum(p.numel() for _, p in self.named_params), "class": type(self.module).__name__},
            "optimizer": type(self.optimizer).__name__,
            "scheduler": type(self.scheduler).__name__ if self.scheduler is not None else None,
            "scaler": self.scaler is not None and bool(getattr(self.scaler, "is_enabled", lambda: True)()),
            "optimizer_steps": self.steps, "epochs": self.epochs, "mode": self.cfg.mode,
            "found_by": self.found_by, "loss_fn": self.loss_fn is not None,
            "cpu": cpu_budget(getattr(l, "num_workers", None) if l is not None else None),
        }
        meta.update(self.recorder.meta())
        if exit_ok:
            meta["exit"] = "ok"
        files.write_record(os.path.join(self.cfg.run, layout.companion_meta_file(self.rank)), layout.META_RECORD, meta)

    def _on_exception(self, tp: Any, value: Any, tb: Any) -> None:
        self.failed = True
        try:
            if not self.hb.has_reason():
                self.hb.reason("%s: %s" % (tp.__name__, value))
            self.hb.set_state(hb.FAILED)
        finally:
            self._excepthook(tp, value, tb)

    def _at_exit(self) -> None:
        if self.exited:
            return
        self.exited = True
        self.recorder.at_exit(self.failed)
        self.write_meta(exit_ok=not self.failed)
        if not self.failed:
            self.hb.set_state(hb.DONE)
