"""What a mode records, at the moments the companion (companion.py) calls on it: one recorder per mode
(check.py: the verification logs `--check` judges; record.py: torch.profiler for `--record`). Every moment is a
no-op here, so a mode implements only those it records."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional


class Recorder:
    def set_loss_fn(self, loss_fn: Any) -> None:
        """The loss the script handed to attach after the companion found the job itself."""

    def adopt_loader(self, loader: Any) -> None:
        """The training loader, once known (its sampler's draws can be followed from now)."""

    def first_batch(self, loader: Any) -> None:
        """The first training batch was taken from `loader`."""

    def on_batch(self, batch: Any, epoch: int, b: int, micro: int, draw_pass: Optional[int] = None) -> None:
        """A training forward takes `batch`, the b-th of `epoch`, micro-batch `micro` of the current step; it came
        from the sampler's pass `draw_pass` (sampling.Draws; None: the latest)."""

    def drop_batch(self, batch: Any, draw_pass: Optional[int] = None) -> None:
        """A batch of pass `draw_pass` was fetched and never trained on (a peek, a resume skipping ahead, a
        framework's look-ahead)."""

    def forward_pre(self, step: int, micro: int) -> None:
        """Before the DDP model's forward."""

    def forward_post(self, args: Any, kwargs: Any, out: Any) -> None:
        """After the DDP model's forward."""

    def before_clip(self, step: int) -> None:
        """The script is about to clip the gradients of optimizer step `step` (they are synced by now)."""

    def before_update(self, step: int) -> None:
        """Right before the optimizer updates the parameters (after a closure's forward and backward)."""

    def after_step(self, step: int) -> None:
        """After optimizer step `step` (0-based)."""

    def saved(self, k: int, obj: Any, path: Optional[str], copy_to: Callable[[str], None]) -> None:
        """The job's k-th checkpoint: `obj` as saved at `path` (None: into a buffer); copy_to(dst) copies it."""

    def reads_saved_directory(self) -> bool:
        """Whether saved() wants a checkpoint directory's content read back (it costs a load of every file)."""
        return False

    def meta(self) -> Dict[str, Any]:
        """The mode's own fields of the companion's meta (layout.RECORDS["companion_meta"])."""
        return {"dropout_off_modules": 0, "forward_random_beyond_dropout": False}

    def at_exit(self, failed: bool) -> None:
        """The process ends (`failed`: by an exception)."""
