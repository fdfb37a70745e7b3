"""One of each per iteration (train.iteration, runtime/check/judges_iteration.cpp): what ran between two optimizer
steps, counted on the rank, written into each step's training line.

- backwards: backward passes that reached the model's parameters. A gradient hook on every trainable parameter;
  the first to fire opens a backward and queues the engine's end-of-backward callback that closes it (DDP's own
  reducer knows a backward's end the same way), so a parameter a backward skips does not hide it.
- stale_grads: the first backward after an optimizer step found a gradient the step had used still there, and no
  zero_grad (the optimizer's or the model's) ran before the next step: nothing zeroed it, so the gradients pile up
  across steps. Looked at on the parameter whose hook fired first: zero_grad clears every parameter alike. Both are
  needed: a GAN's generator backward runs through the discriminator after the discriminator's step and before its
  zero_grad, and `p.grad = None` by hand calls no zero_grad.
- step_before_backward: the step ran after a training forward and before that forward's backward: it applied the
  previous iteration's gradients.
The forwards of a step are counted by training.py (a forward through the DDP model with grad enabled)."""
from __future__ import annotations

from typing import Any, Dict, List

import torch


class Iteration:
    def __init__(self, params: List[Any]) -> None:
        self.backwards = 0
        self.in_backward = False
        self.stale = False
        self.zeroed = False         # a zero_grad ran since the last step
        self.step_before_backward = False
        self.forward_open = False  # a training forward with no backward after it yet
        self.stepped = False        # an optimizer step happened and no backward has run since
        self._handles = [p.register_hook(self._hook(p)) for p in params]

    def _hook(self, p: Any) -> Any:
        def on_grad(grad: Any) -> None:
            if not self.in_backward:
                self._open(p)
            return None

        return on_grad

    def _open(self, p: Any) -> None:
        self.in_backward = True
        self.backwards += 1
        self.forward_open = False
        if self.stepped:
            self.stepped = False
            g = p.grad
            self.stale |= g is not None and bool(g.detach().ne(0).any())
        torch.autograd.Variable._execution_engine.queue_callback(self._close)

    def _close(self) -> None:
        self.in_backward = False

    def zero_grad_called(self) -> None:
        self.zeroed = True

    def forward(self) -> None:
        """A training forward (grad enabled) through the DDP model."""
        self.forward_open = True

    def before_update(self) -> None:
        self.step_before_backward |= self.forward_open

    def step_fields(self) -> Dict[str, Any]:
        """This step's counts for its training line, and a fresh count for the next."""
        fields = {"backwards": self.backwards, "stale_grads": self.stale and not self.zeroed,
                  "step_before_backward": self.step_before_backward}
        self.backwards, self.stale, self.step_before_backward, self.stepped = 0, False, False, True
        self.zeroed = False
        return fields


_TOLD: Dict[int, Any] = {}  # id of a watched optimizer or module -> what its zero_grad tells


def watch_zero_grad(obj: Any, told: Any) -> None:
    """`told()` whenever obj.zero_grad runs (an optimizer, a module). Patched on its class, not on the instance: an
    instance attribute would travel into a pickle of the object (`torch.save(model)`) and break it; the class's
    wrapper asks whether the object at hand is watched."""
    cls = type(obj)
    original = getattr(cls, "zero_grad", None)
    if original is None:
        return
    _TOLD[id(obj)] = told
    if getattr(original, "_ddp_profile", False):
        return

    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        f = _TOLD.get(id(self))
        if f is not None:
            f()
        return original(self, *args, **kwargs)

    zero_grad._ddp_profile = True  # type: ignore[attr-defined]
    try:
        cls.zero_grad = zero_grad
    except (AttributeError, TypeError):
        pass
