"""The synced gradients of a verified step as they were before the script clipped them. numerics.reference compares
each rank's gradient with the single-process gradient of the union batch; clip_grad_norm_ scales the rank's by
max_norm / norm first (the Hugging Face Trainer and Lightning clip at 1.0 by default), which would read as a loss of
the wrong scale. So torch's clipping functions, looked up by name at each call as frameworks do, first tell the
companion: the gradients are synced by then (clipping follows the backward), and it keeps them for the step's dump."""
from __future__ import annotations

import functools
from typing import Any, Callable

_NAMES = ("clip_grad_norm_", "clip_grad_value_")


def install(before_clip: Callable[[], None]) -> None:
    import torch.nn.utils as utils
    import torch.nn.utils.clip_grad as clip_grad

    for module in (utils, clip_grad):
        for name in _NAMES:
            original = getattr(module, name, None)
            if original is None or getattr(original, "_ddp_profile", False):
                continue
            setattr(module, name, _told_first(original, before_clip))


def _told_first(original: Callable[..., Any], before_clip: Callable[[], None]) -> Callable[..., Any]:
    @functools.wraps(original)
    def clip(*args: Any, **kwargs: Any) -> Any:
        before_clip()
        return original(*args, **kwargs)

    clip._ddp_profile = True  # type: ignore[attr-defined]
    return clip
