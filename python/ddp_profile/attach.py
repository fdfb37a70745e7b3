"""attach(): the companion proper. With DDP_PROFILE_RUN unset it returns a Passthrough and installs nothing."""
from __future__ import annotations

import atexit
import datetime
import os
import platform
import signal
import socket
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch

from . import env, files, flight_recorder, hashing, heartbeat as hb, layout
from .env import Config

__version__ = "0.1.0"


class Passthrough:
    """What attach returns when not run under ddp_profile: loader() is the identity, save/load are torch's."""
    enabled = False

    def __init__(self) -> None:
        self.save: Callable[..., Any] = torch.save
        self.load: Callable[..., Any] = torch.load

    def loader(self, loader: Any) -> Any:
        return loader


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _len(x: Any) -> Optional[int]:
    try:
        return len(x) if x is not None else None
    except TypeError:
        return None


def _rng_states() -> Dict[str, Any]:
    """Every RNG stream a resume might have to restore, as it is now (numpy only when the script imported it)."""
    out: Dict[str, Any] = {"rng.torch": torch.get_rng_state(), "rng.random": __import__("random").getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["rng.cuda"] = torch.cuda.get_rng_state()
    np = sys.modules.get("numpy")
    if np is not None:
        out["rng.numpy"] = np.random.get_state()
    return out


def _same_state(a: Any, b: Any) -> bool:
    """Two snapshots of one RNG stream equal: tensors compared, the rest (tuples of ints, numpy's arrays) pickled."""
    import pickle

    if a is None or b is None:
        return False
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return pickle.dumps(a) == pickle.dumps(b)


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


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user's module inside DDP (and inside Lightning's wrapper, whose forward redirects to training_step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    m = model.module if isinstance(model, DDP) else model
    inner = getattr(m, "_forward_module", None)
    return inner if isinstance(inner, torch.nn.Module) else m


_current: Optional["Companion"] = None  # one companion per process: attach() and ddp_profile.auto share it


def current() -> Optional["Companion"]:
    return _current


class Companion:
    enabled = True

    def __init__(self, cfg: Config, model: torch.nn.Module, optimizer: Any, loss_fn: Any, sampler: Any,
                 scheduler: Any, scaler: Any, found_by: str = "attach") -> None:
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
        self.epochs = 0           # dp.loader() iterations begun
        self.epoch = 0            # the current one, 0-based
        self.batches_in_step = 0  # micro-batches yielded since the last optimizer step
        self.forwards_in_step = 0
        self.saves = 0
        self.before_update_done = False
        self.buffer_path: Optional[str] = None  # set by ddp_profile.auto: the file a save into a buffer becomes
        self.failed = False
        self.exited = False
        self.loader_obj: Any = None
        self.in_epoch = False     # inside a dp.loader() iteration
        self.batch_in_epoch = 0   # batches it has yielded
        self.dataset_probe: Any = None
        self.pre_step_params: Any = None
        self.rng_at_attach = _rng_states()
        self.resume_point_due = True  # at the first training forward, and the first after each dp.save
        self.first_batch: Optional[Dict[str, Any]] = None
        self.pending: List[Dict[str, Any]] = []  # this step's sample lines, written at its post-hook
        self.stream: Any = None
        self.t_step = time.monotonic_ns()
        self.start_time = datetime.datetime.now(datetime.timezone.utc).isoformat()
        self.verify = os.path.join(cfg.run, layout.VERIFY_DIR)
        os.makedirs(self.verify, exist_ok=True)
        self.hb = hb.Heartbeat(cfg.run, self.rank)
        flight_recorder.watch(cfg.run, self.rank)  # a hang's dump, on the supervisor's request
        self.numerics: Any = None
        self.coll: Any = None
        self.training: Any = None
        self.recorder: Any = None
        r = self.rank
        if cfg.check:
            from .collectives import Collectives
            from .numerics import Numerics
            from .sampling import record

            j = lambda kind: files.Jsonl(os.path.join(cfg.run, layout.verify_log_file(r, kind)))  # noqa: E731
            self.samples, self.replicas = j(layout.SAMPLES), j(layout.REPLICAS)
            self.summaries, self.checkpoints = j(layout.SUMMARIES), j(layout.CHECKPOINTS)
            self.resume_points = j(layout.RESUME_POINTS)
            self.coll_out = j(layout.COLLECTIVES)
            self.numerics = Numerics(self.module, loss_fn, cfg.run, r, cfg.verify_steps, self.summaries)
            self.coll = Collectives(model, self.coll_out)
            from .training import Training

            self.training = Training(self.module, optimizer, scheduler, j(layout.TRAINING))
            from .training import outside_optimizer

            self.outside_optimizer = outside_optimizer(self.module, optimizer)  # once: it may walk every object
            from .frameworks import scheduler_rule

            self.scheduler_rule = scheduler_rule(scheduler)
            if sampler is not None:
                self.stream = record(sampler)
            self.replicas.write({"step": -1, "param_hash": hashing.tensors_hash(p for _, p in self.named_params)})
        else:
            from .record import Recorder

            self.recorder = Recorder(cfg.run, r, cfg.schedule)
        optimizer.register_step_pre_hook(self._step_pre)
        optimizer.register_step_post_hook(self._step_post)
        model.register_forward_pre_hook(self._forward_pre)
        model.register_forward_hook(self._forward_post, with_kwargs=True)
        self._excepthook = sys.excepthook
        sys.excepthook = self._on_exception
        atexit.register(self._at_exit)
        self.write_meta()
        self.hb.set_state(hb.RUNNING)

    # -- the user's calls -------------------------------------------------------------------------------------------
    def loader(self, loader: Any) -> Any:
        self.adopt_loader(loader)
        return _Loader(self, loader)

    def adopt_loader(self, loader: Any) -> None:
        """The training loader: its sampler's draws are recorded (ddp_profile.auto calls this for the loader it saw
        the first training batch come from)."""
        if self.loader_obj is None:
            self.loader_obj = loader
        if self.cfg.check and self.stream is None:
            from .sampling import record_loader

            self.stream = record_loader(loader, self.sampler)

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
        self._saved(files.load_directory(path) if self.cfg.check else None, os.fspath(path),
                    lambda dst: files.copy_tree(path, dst))

    def _saved(self, obj: Any, path: Optional[str], copy_to: Callable[[str], None]) -> None:
        """After the k-th save: in check mode its copy in the run folder (what a resume is given) and what it holds
        against what a resume needs; then, when the ladder's killed run asked for it, the hold."""
        self.saves += 1
        self.resume_point_due = True
        k = self.saves
        if self.cfg.check:
            from .checkpoint_items import Items

            copy_rel = layout.companion_save_copy_file(k, self.rank)
            copy_to(os.path.join(self.cfg.run, copy_rel))
            items = Items(self.module, self.optimizer, self.scheduler, self.scaler,
                          self._sampler() is not None)
            loader_len = _len(self.loader_obj)
            self.checkpoints.write({
                "index": k, "step": self.steps, "epoch": self.epoch, "path": path,
                "abs_path": os.path.abspath(path) if path is not None else None,
                "copy": copy_rel, "expected": items.expected(), "found": items.found(obj),
                # What a resume from here could do without: derived at an epoch's boundary, RNGs never drawn from.
                "epoch_boundary": not self.in_epoch or (loader_len is not None and self.batch_in_epoch >= loader_len),
                "rng_untouched": sorted(set(self.rng_at_attach) - set(self._rngs_touched()))})
        if self.cfg.hold_after_save == k:
            sys.stderr.write("ddp_profile: rank %d: holding after save %d\n" % (self.rank, k))
            sys.stderr.flush()
            while True:
                time.sleep(1)

    def load(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        return torch.load(f, *args, **kwargs)

    # -- the loader's side ------------------------------------------------------------------------------------------
    def _sampler(self) -> Any:
        if self.sampler is not None:
            return self.sampler
        from .sampling import own_batch_sampler

        own = own_batch_sampler(self.loader_obj) if self.loader_obj is not None else None
        return own if own is not None else getattr(self.loader_obj, "sampler", None)

    def begin_epoch(self, loader: Any) -> int:
        e = self.epochs
        self.epoch = e
        self.epochs += 1
        self.hb.epoch(e)
        return e

    def on_batch(self, batch: Any, epoch: int, b: int) -> None:
        from .sampling import batch_len, first_tensors, take

        if self.first_batch is None:
            ts = first_tensors(batch)
            self.first_batch = {k: {"shape": list(t.shape), "dtype": _dtype(t)} for k, t in zip(("x", "y"), ts)}
            if self.cfg.check:
                from .dataset_probe import probe

                self.dataset_probe = probe(getattr(self.loader_obj, "dataset", None))
            self.write_meta()
        if not self.cfg.check:
            return
        s = self._sampler()
        self.pending.append({"epoch": epoch, "sampler_epoch": getattr(s, "epoch", None), "micro": self.batches_in_step,
                             "batch": b, "indices": take(self.stream, batch_len(batch))})
        self.batches_in_step += 1
        if self.numerics.verifying(self.steps) and self.loss_fn is not None:
            from .numerics import to_device

            mine = to_device(batch, "cpu")
            if self.world > 1 and torch.distributed.is_initialized():
                every: List[Any] = [None] * self.world
                torch.distributed.all_gather_object(every, mine)
                self.numerics.add_union(every)
            else:
                self.numerics.add_union([mine])

    # -- hooks ------------------------------------------------------------------------------------------------------
    def _forward_pre(self, module: Any, args: Any) -> None:
        self.hb.stage(hb.FORWARD)
        micro = self.forwards_in_step
        self.forwards_in_step += 1
        if self.numerics is not None:
            if self.resume_point_due and torch.is_grad_enabled():
                self._resume_point()
            self.training.forward_pre()  # before the verified steps turn dropout off
            self.coll.forward(self.steps, micro)
            self.numerics.begin_forward(self.steps, micro)

    def _forward_post(self, module: Any, args: Any, kwargs: Any, out: Any) -> None:
        if self.numerics is not None:
            self.numerics.end_forward()
            self.training.forward_post(args, kwargs, out)
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
        if self.numerics is not None:
            self.coll.flush()
            self.training.before_step()
            if self.numerics.verifying(self.steps):
                self.pre_step_params = self.numerics.dump(self.steps, self.named_params)

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
        if self.cfg.check:
            self._flush_samples(s)
            self.replicas.write({"step": s, "param_hash": hashing.tensors_hash(p for _, p in self.named_params)})
            self.training.after_step(s, self.pre_step_params)
            self.pre_step_params = None
            self.numerics.step_done(s)
        self.steps = s + 1
        self.batches_in_step = self.forwards_in_step = 0
        now = time.monotonic_ns()
        self.hb.step_time(now - self.t_step)
        self.t_step = now
        self.hb.step(self.steps, self.epoch)
        if self.recorder is not None:
            self.recorder.step()

    def _flush_samples(self, step: int) -> None:
        for line in self.pending:
            line["step"] = step
            self.samples.write(line)
        self.pending = []

    # -- files ------------------------------------------------------------------------------------------------------
    def write_meta(self, exit_ok: bool = False) -> None:
        p0 = next(iter(self.module.parameters()), None)
        cuda = p0 is not None and p0.device.type == "cuda"
        s, l = self._sampler(), self.loader_obj
        from .numerics import dropouts
        from .sampling import sampler_info

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
            "dropout_off_modules": len(dropouts(self.module)) if self.cfg.check and self.cfg.verify_steps > 0 else 0,
            "forward_random_beyond_dropout": bool(self.numerics is not None and self.numerics.random_beyond_dropout),
            "optimizer_steps": self.steps, "epochs": self.epochs, "mode": self.cfg.mode,
            "found_by": self.found_by, "loss_fn": self.loss_fn is not None,
        }
        if self.cfg.check:
            meta["params_outside_optimizer"] = self.outside_optimizer
            meta["scheduler_steps_per_optimizer_step"], meta["scheduler_rule"] = self.scheduler_rule
            meta["dataset_probe"] = self.dataset_probe
            if self.numerics.reference_error is not None:
                meta["reference_error"] = self.numerics.reference_error
        if exit_ok:
            meta["exit"] = "ok"
        files.write_json(os.path.join(self.cfg.run, layout.companion_meta_file(self.rank)), meta)

    def _state_items(self) -> List[Any]:
        """(name, hash) of everything the job's state holds, in the order it holds them: parameters, the optimizer's
        state per parameter, its param_groups, the scheduler, the scaler."""
        import json

        jh = lambda v: hashing.bytes_hash(json.dumps(v, sort_keys=True, default=str).encode())  # noqa: E731
        items = [("param:" + n, hashing.tensors_hash([p])) for n, p in self.named_params]
        names = {id(p): n for n, p in self.named_params}
        for g in self.optimizer.param_groups:
            for p in g["params"]:
                for k, v in sorted(self.optimizer.state.get(p, {}).items()):
                    h = hashing.tensors_hash([v]) if isinstance(v, torch.Tensor) else jh(v)
                    items.append(("optimizer:%s.%s" % (names.get(id(p), "?"), k), h))
        items.append(("optimizer.param_groups", jh(self.optimizer.state_dict()["param_groups"])))
        if self.scheduler is not None:
            items.append(("scheduler", jh(self.scheduler.state_dict())))
        if self.scaler is not None and getattr(self.scaler, "is_enabled", lambda: True)():
            items.append(("scaler", jh(self.scaler.state_dict())))
        return items

    def _final(self) -> None:
        out = files.Jsonl(os.path.join(self.cfg.run, layout.verify_log_file(self.rank, layout.FINAL)))
        for name, h in self._state_items():
            out.write({"name": name, "hash": h})
        out.close()

    def _rngs_touched(self) -> Dict[str, Any]:
        """The RNG streams drawn from or set since attach, as they are now. An untouched one holds whatever the
        process start gave it (Python's and numpy's are seeded from the OS): nothing a resume must restore."""
        return {k: v for k, v in _rng_states().items() if not _same_state(v, self.rng_at_attach.get(k))}

    def _resume_point(self) -> None:
        """At the first training forward of the process and the first after each dp.save: the state and the RNG
        streams as this forward finds them. checkpoint.resume compares the resumed run's first with the straight
        run's after the save it resumed from: the first item that differs is what the resume did not restore."""
        import pickle

        items = self._state_items() + [(k, hashing.tensors_hash([v]) if isinstance(v, torch.Tensor)
                                        else hashing.bytes_hash(pickle.dumps(v)))
                                       for k, v in sorted(self._rngs_touched().items())]
        self.resume_points.write({"after_save": self.saves, "step": self.steps, "items": [[k, h] for k, h in items]})
        self.resume_point_due = False

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
        if self.recorder is not None:
            try:
                self.recorder.stop()
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("ddp_profile: profiler stop failed: %s\n" % e)
        if self.cfg.check:
            if self.coll is not None:
                self.coll.flush()
            self._flush_samples(self.steps)
            if not self.failed:
                self._final()
        self.write_meta(exit_ok=not self.failed)
        if not self.failed:
            self.hb.set_state(hb.DONE)


def attach(model: torch.nn.Module, optimizer: Any, loss_fn: Optional[Callable[[torch.nn.Module, Any], Any]] = None,
           sampler: Any = None, scheduler: Any = None, scaler: Any = None) -> Any:
    """Call after DDP(...). Returns a Passthrough unless DDP_PROFILE_RUN is set (and torch >= 2.0)."""
    cfg = env.read()
    if cfg is None:
        return Passthrough()
    if _current is not None:  # ddp_profile.auto attached first (the script calls attach after its first forward)
        return _current
    env.check_format()
    if not hasattr(optimizer, "register_step_pre_hook"):
        sys.stderr.write("ddp_profile: torch %s has no optimizer step hooks (needs >= 2.0): not recording\n"
                         % torch.__version__)
        return Passthrough()
    return Companion(cfg, model, optimizer, loss_fn, sampler, scheduler, scaler)
