"""Check mode: what `ddp_profile --check` judges, recorded beside the job (the C++ judges read it; nothing is judged
here). The companion (companion.py) calls every mode's recorder at the same moments (recorder.py); this one writes the
verification logs of layout.VERIFY_RECORDS: the consumed samples, the replicas' hashes, the verified steps' tensors and
the single-process reference (numerics.py), the gradient collectives per micro-step (collectives.py), the training
log (training.py), the checkpoints and what they hold (checkpoint_items.py), the state at each resume point and the
final state."""
from __future__ import annotations

import json
import os
import pickle
import random
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import files, hashing, layout, replicated
from .checkpoint_items import Items
from .collectives import Collectives
from .dataset_probe import probe
from .frameworks import scheduler_rule
from .ground import dropouts, own, to_device
from .iteration import watch_zero_grad
from .numerics import Numerics
from .recorder import Recorder
from .sampling import batch_len, pass_epoch, record, record_loader, take
from .tensor_census import Census
from .training import Training, ddp_registered, outside_optimizer


def rng_states() -> Dict[str, Any]:
    """Every RNG stream a resume might have to restore, as it is now (numpy only when the script imported it)."""
    out: Dict[str, Any] = {"rng.torch": torch.get_rng_state(), "rng.random": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["rng.cuda"] = torch.cuda.get_rng_state()
    np = sys.modules.get("numpy")
    if np is not None:
        out["rng.numpy"] = np.random.get_state()
    return out


def _same_state(a: Any, b: Any) -> bool:
    """Two snapshots of one RNG stream equal: tensors compared, the rest (tuples of ints, numpy's arrays) pickled."""
    if a is None or b is None:
        return False
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return pickle.dumps(a) == pickle.dumps(b)


def _len(x: Any) -> Optional[int]:
    try:
        return len(x) if x is not None else None
    except TypeError:
        return None


class CheckRecorder(Recorder):
    def __init__(self, comp: Any) -> None:
        self.c = c = comp
        log = lambda kind: files.Jsonl(os.path.join(c.cfg.run, layout.verify_log_file(c.rank, kind)),  # noqa: E731
                                       layout.VERIFY_RECORDS[kind])
        self.samples, self.replicas = log(layout.SAMPLES), log(layout.REPLICAS)
        self.checkpoints, self.resume_points = log(layout.CHECKPOINTS), log(layout.RESUME_POINTS)
        self.numerics = Numerics(c.module, c.loss_fn, c.cfg.run, c.rank, c.cfg.verify_steps, log(layout.SUMMARIES))
        self.coll = Collectives(c.model, log(layout.COLLECTIVES))
        self.training = Training(c.module, c.optimizer, c.scheduler, log(layout.TRAINING), ddp_registered(c.model))
        self.training.census = Census(c.cfg.verify_steps + 1, lambda: c.epoch)
        for obj in (c.optimizer, c.model, c.module):
            watch_zero_grad(obj, self.training.iteration.zero_grad_called)
        self.outside_optimizer = outside_optimizer(c.module, c.optimizer)  # once: it may walk every object
        self.scheduler_rule: Tuple[int, str] = scheduler_rule(c.scheduler)
        self.stream = record(c.sampler) if c.sampler is not None else None
        self.dataset_probe: Any = None
        self.pending: List[Dict[str, Any]] = []  # this step's sample lines, written at its post-hook
        self.pre_step_params: Any = None
        self.rng_at_attach = own(rng_states())
        self.resume_point_due = True  # at the first training forward, and the first after each save
        self.buffers_in_sync: Optional[replicated.Pairs] = None  # this step's, at its first forward inside DDP
        c.module.register_forward_pre_hook(self._buffers_after_broadcast)
        self.replicas.write({"step": -1, "param_hash": hashing.tensors_hash(p for _, p in c.named_params),
                             "state": replicated.buffers(c.module) + self._replicated_settings()})

    def set_loss_fn(self, loss_fn: Any) -> None:
        self.numerics.loss_fn = loss_fn

    # -- the data ---------------------------------------------------------------------------------------------------
    def adopt_loader(self, loader: Any) -> None:
        if self.stream is None:
            self.stream = record_loader(loader, self.c.sampler)

    def first_batch(self, loader: Any) -> None:
        self.dataset_probe = probe(getattr(loader, "dataset", None))

    def on_batch(self, batch: Any, epoch: int, b: int, micro: int, draw_pass: Optional[int] = None) -> None:
        sampler_epoch = pass_epoch(self.stream, draw_pass)
        if sampler_epoch is None:
            sampler_epoch = getattr(self.c.sampler_in_use(), "epoch", None)
        self.pending.append({"epoch": epoch, "sampler_epoch": sampler_epoch, "micro": micro,
                             "batch": b, "indices": take(self.stream, batch_len(batch), draw_pass)})
        # Every rank joins the gather while the script has a loss (rank 0 may have dropped its reference since).
        if self.numerics.verifying(self.c.steps) and self.c.loss_fn is not None:
            mine = to_device(batch, "cpu")
            if self.c.world > 1 and torch.distributed.is_initialized():
                every: List[Any] = [None] * self.c.world
                torch.distributed.all_gather_object(every, mine)
                self.numerics.add_union(every)
            else:
                self.numerics.add_union([mine])

    def drop_batch(self, batch: Any, draw_pass: Optional[int] = None) -> None:
        """A batch fetched and never trained on: its indices are taken off its pass."""
        take(self.stream, batch_len(batch), draw_pass)

    # -- what is replicated ----------------------------------------------------------------------------------------
    def _buffers_after_broadcast(self, module: Any, args: Any) -> None:
        if self.buffers_in_sync is None and torch.is_grad_enabled():
            self.buffers_in_sync = replicated.buffers(module)

    def _replicated_settings(self) -> replicated.Pairs:
        c = self.c
        return (replicated.optimizer(c.optimizer) + replicated.scheduler(self.training.scheduler or c.scheduler) +
                replicated.sampler(c.sampler_in_use()) + replicated.scaler(c.scaler))

    # -- the step ---------------------------------------------------------------------------------------------------
    def forward_pre(self, step: int, micro: int) -> None:
        if self.resume_point_due and torch.is_grad_enabled():
            self._resume_point()
        self.training.forward_pre()  # before the verified steps turn dropout off
        self.coll.forward(step, micro)
        self.numerics.begin_forward(step, micro)

    def forward_post(self, args: Any, kwargs: Any, out: Any) -> None:
        self.numerics.end_forward()
        self.training.forward_post(args, kwargs, out)

    def before_clip(self, step: int) -> None:
        self.numerics.keep_synced_grads(step, self.c.named_params)

    def before_update(self, step: int) -> None:
        self.coll.flush()
        self.training.before_step()
        if self.numerics.verifying(step):
            self.pre_step_params = self.numerics.dump(step, self.c.named_params)

    def after_step(self, step: int) -> None:
        self._flush_samples(step)
        self.replicas.write({"step": step, "param_hash": hashing.tensors_hash(p for _, p in self.c.named_params),
                             "state": (self.buffers_in_sync or []) + self._replicated_settings()})
        self.buffers_in_sync = None
        self.training.after_step(step, self.pre_step_params)
        self.pre_step_params = None
        self.numerics.step_done(step)

    def _flush_samples(self, step: int) -> None:
        for line in self.pending:
            line["step"] = step
            self.samples.write(line)
        self.pending = []

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def saved(self, k: int, obj: Any, path: Optional[str], copy_to: Callable[[str], None]) -> None:
        """The k-th save: its copy in the run folder (what a resume is given) and what it holds against what a
        resume needs."""
        c = self.c
        self.resume_point_due = True
        name = os.path.basename(os.path.normpath(path)) if path is not None else layout.BUFFER_SAVE_NAME
        copy_rel = layout.companion_save_copy_file(k, c.rank, name)
        copy_to(os.path.join(c.cfg.run, copy_rel))
        items = Items(c.module, c.optimizer, c.scheduler, c.scaler, c.sampler_in_use() is not None)
        loader_len = _len(c.loader_obj)
        self.checkpoints.write({
            "index": k, "step": c.steps, "epoch": c.epoch, "path": path,
            "abs_path": os.path.abspath(path) if path is not None else None,
            "copy": copy_rel, "expected": items.expected(), "found": items.found(obj),
            # What a resume from here could do without: derived at an epoch's boundary, RNGs never drawn from.
            "epoch_boundary": not c.in_epoch or (loader_len is not None and c.batch_in_epoch >= loader_len),
            "rng_untouched": sorted(set(self.rng_at_attach) - set(self._rngs_touched()))})

    def reads_saved_directory(self) -> bool:
        return True

    def _state_items(self) -> List[Tuple[str, str]]:
        """(name, hash) of everything the job's state holds, in the order it holds them: parameters, the optimizer's
        state per parameter, its param_groups, the scheduler, the scaler."""
        c = self.c
        jh = lambda v: hashing.bytes_hash(json.dumps(v, sort_keys=True, default=str).encode())  # noqa: E731
        items = [("param:" + n, hashing.tensors_hash([p])) for n, p in c.named_params]
        names = {id(p): n for n, p in c.named_params}
        for g in c.optimizer.param_groups:
            for p in g["params"]:
                for k, v in sorted(c.optimizer.state.get(p, {}).items()):
                    h = hashing.tensors_hash([v]) if isinstance(v, torch.Tensor) else jh(v)
                    items.append(("optimizer:%s.%s" % (names.get(id(p), "?"), k), h))
        items.append(("optimizer.param_groups", jh(c.optimizer.state_dict()["param_groups"])))
        if c.scheduler is not None:
            items.append(("scheduler", jh(c.scheduler.state_dict())))
        if c.scaler is not None and getattr(c.scaler, "is_enabled", lambda: True)():
            items.append(("scaler", jh(c.scaler.state_dict())))
        return items

    def _rngs_touched(self) -> Dict[str, Any]:
        """The RNG streams drawn from or set since attach, as they are now. An untouched one holds whatever the
        process start gave it (Python's and numpy's are seeded from the OS): nothing a resume must restore."""
        return {k: v for k, v in rng_states().items() if not _same_state(v, self.rng_at_attach.get(k))}

    def _resume_point(self) -> None:
        """At the first training forward of the process and the first after each save: the state and the RNG
        streams as this forward finds them. checkpoint.resume compares the resumed run's first with the straight
        run's after the save it resumed from: the first item that differs is what the resume did not restore."""
        items = self._state_items() + [(k, hashing.tensors_hash([v]) if isinstance(v, torch.Tensor)
                                        else hashing.bytes_hash(pickle.dumps(v)))
                                       for k, v in sorted(self._rngs_touched().items())]
        self.resume_points.write({"after_save": self.c.saves, "step": self.c.steps,
                                  "items": [[k, h] for k, h in items]})
        self.resume_point_due = False

    # -- the meta and the end ---------------------------------------------------------------------------------------
    def meta(self) -> Dict[str, Any]:
        m: Dict[str, Any] = {
            "dropout_off_modules": len(dropouts(self.c.module)) if self.c.cfg.verify_steps > 0 else 0,
            "forward_random_beyond_dropout": bool(self.numerics.random_beyond_dropout),
            "params_outside_optimizer": self.outside_optimizer,
            "scheduler_steps_per_optimizer_step": self.scheduler_rule[0], "scheduler_rule": self.scheduler_rule[1],
            "dataset_probe": self.dataset_probe,
        }
        if self.numerics.reference_error is not None:
            m["reference_error"] = self.numerics.reference_error
        return m

    def at_exit(self, failed: bool) -> None:
        self.coll.flush()
        self._flush_samples(self.c.steps)
        if failed:
            return
        out = files.Jsonl(os.path.join(self.c.cfg.run, layout.verify_log_file(self.c.rank, layout.FINAL)),
                          layout.VERIFY_RECORDS[layout.FINAL])
        for name, h in self._state_items():
            out.write({"name": name, "hash": h})
        out.close()
