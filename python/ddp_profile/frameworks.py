"""What ddp_profile.auto knows of the frameworks that build the DDP model themselves.

- PyTorch Lightning: DDP wraps Lightning's _LightningModuleWrapperBase, whose forward is the LightningModule's
  training_step: that is the loss, so the single-process reference runs training_step on the union batch (on a copy
  of the module detached from the Trainer: its self.log calls only warn there). Its checkpoints are torch.save of a
  dict whose "state_dict" holds the module's weights (into a buffer Lightning then writes): found as any save is.
- Hugging Face accelerate: prepare() builds the DDP model and wraps the optimizer (auto finds the inner one) and the
  loader; save_state(dir) writes a directory (model weights as safetensors, optimizer.bin, random_states_<r>.pkl...),
  which is the checkpoint: recorded after save_state returns, the directory copied.
- Hugging Face Trainer (on accelerate): its checkpoint is the checkpoint-<global step> folder _save_checkpoint
  writes (weights as safetensors, optimizer.pt, scheduler.pt, rng_state_<rank>.pth, trainer_state.json), recorded
  as accelerate's directory is; its resume is trainer.train(resume_from_checkpoint=<a copy of that folder>).
No package is imported here: a framework is recognised by the classes of the objects the job built."""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Optional, Tuple

import torch

from .ground import is_lightning, live_objects, unwrap


def which(model: torch.nn.Module) -> str:
    """How the companion found the job: "lightning", "accelerate" or "auto" (a plain script)."""
    if is_lightning(unwrap(model)):
        return "lightning"
    acc = sys.modules.get("accelerate.state")
    state = getattr(acc, "PartialState", None)
    if state is not None and getattr(state, "_shared_state", None):
        return "accelerate"
    return "auto"


def _loss_of(out: Any) -> Any:
    """training_step returns the loss, or a dict with "loss" (Lightning's two documented forms)."""
    if isinstance(out, dict):
        return out.get("loss")
    return out


def loss_fn(model: torch.nn.Module) -> Optional[Callable[[torch.nn.Module, Any], Any]]:
    if is_lightning(unwrap(model)):
        return _lightning_loss
    trainer = _hf_trainer_of(model)
    if trainer is not None:
        return functools.partial(_hf_trainer_loss, trainer)
    return None


def _hf_trainer_of(model: torch.nn.Module) -> Any:
    """The live Hugging Face Trainer training `model` (one gc walk, only once transformers' trainer is imported)."""
    cls = getattr(sys.modules.get("transformers.trainer"), "Trainer", None)
    if cls is None:
        return None
    inner = unwrap(model)
    return next((t for t in live_objects((cls,)) if getattr(t, "model", None) is inner), None)


def _hf_trainer_loss(trainer: Any, module: torch.nn.Module, batch: Any) -> Any:
    """The loss a single-process Trainer computes on the ranks' union batch: its own compute_loss, given the
    num_items_in_batch its own rule counts there (for a causal LM, the labels it counts may include the first
    position the model's shifted loss never predicts: one process scales by it too), as if its run had one process
    (no count gathered across ranks, the loss not multiplied by their number). What the distributed run adds beyond
    that, such as a world size applied twice, is what the reference is there to weigh."""
    batch = dict(batch)
    args = trainer.args
    saved = getattr(args, "average_tokens_across_devices", None)
    try:
        if saved is not None:
            object.__setattr__(args, "average_tokens_across_devices", False)
        count = getattr(trainer, "_get_num_items_in_batch", None)
        if count is None:  # an older Trainer: it counted no items, or counted them elsewhere
            return trainer.compute_loss(module, batch)
        device = next((v.device for v in batch.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
        items = count([batch], device)
        return trainer.compute_loss(module, batch, num_items_in_batch=items)
    finally:
        if saved is not None:
            object.__setattr__(args, "average_tokens_across_devices", saved)


def _lightning_loss(module: torch.nn.Module, batch: Any) -> Any:
    import warnings

    with warnings.catch_warnings():  # its self.log() calls, on a copy with no Trainer: nothing to log into
        warnings.simplefilter("ignore")
        return _loss_of(module.training_step(batch, 0))


def scheduler_rule(scheduler: Any) -> Tuple[int, str]:
    """How many scheduler.step() calls one optimizer step makes by design: accelerate's prepared scheduler steps the
    user's once per process at each optimizer step (its schedules count single-process steps; not with
    split_batches), else 1. With why, for the check's verdict."""
    mod = sys.modules.get("accelerate.scheduler")
    cls = getattr(mod, "AcceleratedScheduler", None)
    if cls is None or scheduler is None:
        return 1, ""
    for o in live_objects((cls,)):
        if getattr(o, "scheduler", None) is scheduler and getattr(o, "step_with_optimizer", False) and \
                not getattr(o, "split_batches", False):
            from accelerate.state import AcceleratorState

            n = int(AcceleratorState().num_processes)
            return n, ("accelerate's prepared scheduler steps it once per process (%d) at each optimizer step" % n)
    return 1, ""


def install(auto: Any) -> None:
    """Patches for accelerate's save_state and Lightning's checkpoint writer, applied when (and if) their modules are
    imported."""
    _after_import("accelerate.accelerator", lambda m: _patch_accelerate(m, auto))
    _after_import("lightning.fabric.plugins.io.torch_io", lambda m: _patch_lightning_io(m, auto))
    _after_import("lightning_fabric.plugins.io.torch_io", lambda m: _patch_lightning_io(m, auto))
    _after_import("safetensors.torch", lambda m: _patch_safetensors(m, auto))
    _after_import("transformers.trainer", lambda m: _patch_hf_trainer(m, auto))


def _patch_safetensors(st: Any, auto: Any) -> None:
    """safetensors.torch.save_file(tensors, path): a file of the model's weights is a checkpoint, as a torch.save
    of them is (inside accelerate's save_state it is part of the directory instead)."""
    save_file = getattr(st, "save_file", None)
    if save_file is None or getattr(save_file, "_ddp_profile", False):
        return

    @functools.wraps(save_file)
    def save_file_recorded(tensors: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
        out = save_file(tensors, filename, *args, **kwargs)
        auto.saved_file(tensors, filename)
        return out

    save_file_recorded._ddp_profile = True  # type: ignore[attr-defined]
    st.save_file = save_file_recorded


def _after_import(name: str, patch: Callable[[Any], None]) -> None:
    """patch(module) once `name` is imported: now if it already is, else right after its import."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    import importlib.abc
    import importlib.util

    class _After(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            loader = getattr(spec, "loader", None)
            if loader is not None and hasattr(loader, "exec_module"):
                run = loader.exec_module

                def exec_then_patch(module):  # type: ignore[no-untyped-def]
                    run(module)
                    patch(module)

                loader.exec_module = exec_then_patch
            return spec

    sys.meta_path.insert(0, _After())


def _patch_lightning_io(io: Any, auto: Any) -> None:
    """Lightning saves its checkpoint into a buffer with torch.save, then writes the buffer to the path: the path
    is told to the save in between."""
    cls = getattr(io, "TorchCheckpointIO", None)
    if cls is None or getattr(cls.save_checkpoint, "_ddp_profile", False):
        return
    save_checkpoint = cls.save_checkpoint

    @functools.wraps(save_checkpoint)
    def save_checkpoint_named(self: Any, checkpoint: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        auto.buffer_path = str(path)
        try:
            return save_checkpoint(self, checkpoint, path, *args, **kwargs)
        finally:
            auto.buffer_path = None

    save_checkpoint_named._ddp_profile = True  # type: ignore[attr-defined]
    cls.save_checkpoint = save_checkpoint_named


def _patch_accelerate(acc: Any, auto: Any) -> None:
    cls = getattr(acc, "Accelerator", None)
    if cls is None or getattr(cls.save_state, "_ddp_profile", False):
        return
    save_state = cls.save_state

    @functools.wraps(save_state)
    def save_state_recorded(self: Any, output_dir: Any = None, *args: Any, **kwargs: Any) -> Any:
        auto.writing_directory = True
        try:
            where = save_state(self, output_dir, *args, **kwargs)
        finally:
            auto.writing_directory = False
        auto.saved_directory(where if where is not None else output_dir)
        return where

    save_state_recorded._ddp_profile = True  # type: ignore[attr-defined]
    cls.save_state = save_state_recorded


def _hf_checkpoint_folder(trainer: Any) -> Optional[str]:
    """The folder Trainer._save_checkpoint wrote: checkpoint-<global step> in the run's output folder."""
    import os

    try:
        run = trainer._get_output_dir(trial=None)
    except Exception:  # noqa: BLE001  (an older Trainer: the output folder itself)
        run = getattr(trainer.args, "output_dir", None)
    folder = os.path.join(str(run), "checkpoint-%d" % trainer.state.global_step) if run is not None else None
    return folder if folder is not None and os.path.isdir(folder) else None


def _patch_hf_trainer(tr: Any, auto: Any) -> None:
    cls = getattr(tr, "Trainer", None)
    save = getattr(cls, "_save_checkpoint", None)
    if save is None or getattr(save, "_ddp_profile", False):
        return

    @functools.wraps(save)
    def save_checkpoint_recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        auto.writing_directory = True
        try:
            out = save(self, *args, **kwargs)
        finally:
            auto.writing_directory = False
        folder = _hf_checkpoint_folder(self)
        if folder is not None:
            auto.saved_directory(folder)
        return out

    save_checkpoint_recorded._ddp_profile = True  # type: ignore[attr-defined]
    cls._save_checkpoint = save_checkpoint_recorded
