"""Verified steps (optimizer steps 0..N-1, check mode): the pre-step parameters, per micro-batch leaf activations
and synced gradients of this rank (verify/rank<R>_step<S>.pt + summaries), and on rank 0 the single-process
reference (verify/reference_step<S>.pt): a copy of the module with the pre-step weights run on the union of all
ranks' micro-batches. Dropout modules are put in eval() around every forward of a verified step."""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
import torch.nn as nn

from . import files, hashing, layout
from .ground import copy_without_hooks, dropouts, leaves, to_device
from .hashing import same_bits
from .sampling import batch_len

LossFn = Callable[[nn.Module, Any], torch.Tensor]


def concat(batches: List[Any]) -> Any:
    """The union of the ranks' batches, in rank order, along dim 0 (tuple/list/dict of tensors)."""
    b0 = batches[0]
    if isinstance(b0, torch.Tensor):
        return torch.cat([b if b.dim() else b.reshape(1) for b in batches], 0)
    if isinstance(b0, dict):
        return {k: concat([b[k] for b in batches]) for k in b0}
    if isinstance(b0, (tuple, list)):
        return type(b0)(concat([b[i] for b in batches]) for i in range(len(b0)))
    return b0


def _unsync_batchnorm(m: nn.Module) -> None:
    """The reference runs on rank 0 alone: its SyncBatchNorm layers normalise the union batch locally (the same
    statistics the ranks' synced layers computed together) instead of waiting for the other ranks."""
    import types

    for x in m.modules():
        if isinstance(x, nn.SyncBatchNorm):
            x.forward = types.MethodType(nn.modules.batchnorm._BatchNorm.forward, x)  # type: ignore[method-assign]


@contextlib.contextmanager
def _single_process() -> Iterator[None]:
    """While rank 0 runs the reference alone, torch.distributed.is_initialized() answers False, so forward code that
    syncs only when distributed (SyncBatchNorm, the user's own) computes locally instead of waiting for peers."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    saved = dist.is_initialized, c10d.is_initialized
    dist.is_initialized = c10d.is_initialized = lambda: False  # type: ignore[assignment]
    try:
        yield
    finally:
        dist.is_initialized, c10d.is_initialized = saved


def _flat(tree: Dict[str, Any], prefix: str = "") -> Dict[str, torch.Tensor]:
    """{"grads": {"fc.weight": t}, "acts": {"0": {"fc": t}}} -> {"grads/fc.weight": t, "acts/0/fc": t}, in order."""
    out: Dict[str, torch.Tensor] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, prefix + k + "/"))
        else:
            out[prefix + k] = v
    return out


def _cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().clone()


def _off(d: nn.Module) -> None:
    """A Dropout module off: in eval mode, and its p at 0 for the modules that read it into a functional dropout of
    their own (Hugging Face attention passes `self.dropout.p` to F.dropout or scaled_dot_product_attention)."""
    d.eval()
    d.p = 0.0


class Numerics:
    def __init__(self, module: nn.Module, loss_fn: Optional[LossFn], run: str, rank: int, steps: int,
                 summaries: files.Jsonl) -> None:
        self.module, self.loss_fn, self.run, self.rank, self.steps = module, loss_fn, run, rank, steps
        self.summaries = summaries
        self.dropouts = dropouts(module)
        self.random_beyond_dropout = False
        self.synced_grads: Optional[Dict[str, torch.Tensor]] = None  # a verified step's, kept before clipping
        self.reference_error: Optional[str] = None
        self.capturing = False
        self.micro = 0
        self.acts: Dict[int, Dict[str, torch.Tensor]] = {}
        self.unions: List[Any] = []     # rank 0: per micro-batch, the list of all ranks' batches
        self.snapshot: Optional[nn.Module] = None
        self._flags: List[bool] = []
        self._handles = [x.register_forward_hook(self._hook(n)) for n, x in leaves(module)] if steps > 0 else []

    def _hook(self, name: str) -> Callable[..., None]:
        def hook(mod: nn.Module, inp: Any, out: Any) -> None:
            if self.capturing and isinstance(out, torch.Tensor):
                self.acts.setdefault(self.micro, {})[name] = _cpu(out)
        return hook

    def keep_synced_grads(self, step: int, named_params: List[Any]) -> None:
        """Before the script clips a verified step's gradients (clipping.py): they are what the step's dump holds."""
        if self.verifying(step) and self.synced_grads is None:
            self.synced_grads = {n: _cpu(p.grad) for n, p in named_params if p.grad is not None}

    def verifying(self, step: int) -> bool:
        return step < self.steps

    def begin_forward(self, step: int, micro: int) -> None:
        if not self.verifying(step):
            return
        self.micro, self.capturing = micro, True
        self._flags = [(d.training, d.p) for d in self.dropouts]
        for d in self.dropouts:
            _off(d)
        if self.rank == 0 and micro == 0 and self.loss_fn is not None:
            self.snapshot = copy_without_hooks(self.module)  # the pre-step weights

    def end_forward(self) -> None:
        if self.capturing:
            self.capturing = False
            for d, (training, p) in zip(self.dropouts, self._flags):
                d.train(training)
                d.p = p

    def add_union(self, batches: List[Any]) -> None:
        if self.rank == 0:
            self.unions.append(batches)

    def dump(self, step: int, named_params: List[Any]) -> Dict[str, torch.Tensor]:
        """At the optimizer step pre-hook of a verified step: this rank's tensors, then rank 0's reference. Returns the
        pre-step parameters (the training log says which ones the step left unchanged)."""
        params = {n: _cpu(p) for n, p in named_params}
        grads = self.synced_grads if self.synced_grads is not None else \
            {n: _cpu(p.grad) for n, p in named_params if p.grad is not None}
        self.synced_grads = None
        acts = {str(m): a for m, a in sorted(self.acts.items())}
        files.tensors_save(_flat({"params": params, "grads": grads, "acts": acts}),
                           os.path.join(self.run, layout.companion_verify_step_file(self.rank, step)))
        w = self.summaries.write
        for n, t in params.items():
            w({"step": step, "kind": "param", "name": n, "stats": hashing.tensor_summary(t)})
        for m, a in sorted(self.acts.items()):
            for n, t in a.items():
                w({"step": step, "micro": m, "kind": "activation", "name": n, "stats": hashing.tensor_summary(t)})
        for n, t in grads.items():
            w({"step": step, "kind": "grad", "name": n, "stats": hashing.tensor_summary(t)})
        if self.rank == 0 and self.snapshot is not None and self.unions and self.loss_fn is not None:
            try:
                self._reference(step)
            except Exception as e:  # noqa: BLE001  (a loss that needs the live framework: said, the job goes on)
                self.reference_error = "%s: %s" % (type(e).__name__, e)
                self.loss_fn = None
        return params

    def _reference(self, step: int) -> None:
        ref, loss_fn = self.snapshot, self.loss_fn
        assert ref is not None and loss_fn is not None
        _unsync_batchnorm(ref)
        ref.train()
        for x in dropouts(ref):
            _off(x)
        for p in ref.parameters():
            p.grad = None
        acts: Dict[str, Dict[str, torch.Tensor]] = {}
        cur: Dict[str, torch.Tensor] = {}

        def hook(name: str) -> Callable[..., None]:
            def h(mod: nn.Module, inp: Any, out: Any) -> None:
                if isinstance(out, torch.Tensor):
                    cur[name] = _cpu(out)
            return h

        handles = [x.register_forward_hook(hook(n)) for n, x in leaves(ref)]
        p0 = next(iter(ref.parameters()), None)
        device = p0.device if p0 is not None else torch.device("cpu")
        devices = [device.index or 0] if device.type == "cuda" else []
        n = len(self.unions)
        sizes = [[batch_len(b) for b in u] for u in self.unions]
        with torch.random.fork_rng(devices=devices), torch.enable_grad(), _single_process():
            for m, u in enumerate(self.unions):
                cur = {}
                loss = loss_fn(ref, to_device(concat(u), device)) / n
                loss.backward()
                acts[str(m)] = cur
            for h in handles:
                h.remove()
            with torch.no_grad():  # the probe: a forward random beyond nn.Dropout* (F.dropout, noise, ...)
                u0 = to_device(concat(self.unions[0]), device)
                a, b = loss_fn(ref, u0), loss_fn(ref, u0)
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and not same_bits(a, b):  # NaN-aware
                    self.random_beyond_dropout = True
        grads = {k: _cpu(p.grad) for k, p in ref.named_parameters() if p.grad is not None}
        # The layers' module classes: the judge names the kind of the first diverging layer (BatchNorm -> SyncBatchNorm).
        kinds = {n: type(x).__name__ for n, x in leaves(ref)}
        files.tensors_save(_flat({"grads": grads, "acts": acts}), os.path.join(self.run, layout.reference_step_file(step)))
        files.write_record(os.path.join(self.run, layout.reference_meta_file(step)), layout.REFERENCE_META_RECORD,
                           {"batch_sizes": sizes, "kinds": kinds})

    def step_done(self, step: int) -> None:
        self.acts, self.unions, self.snapshot = {}, [], None
        if step + 1 >= self.steps:
            for h in self._handles:
                h.remove()
            self._handles = []
