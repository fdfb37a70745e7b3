"""attach(): the script's own line. Under ddp_profile it is the automatic companion (ddp_profile.auto) plus what the
script hands it — the loss for the single-process reference, a sampler, scheduler or scaler it would not find — so
a script that adds the line keeps every check it has without it. With DDP_PROFILE_RUN unset it returns a
Passthrough and installs nothing."""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch

from . import auto, env
from .companion import __version__, current

__all__ = ["Passthrough", "attach", "__version__"]


class Passthrough:
    """What attach returns when not run under ddp_profile: loader() is the identity, save/load are torch's."""
    enabled = False

    def __init__(self) -> None:
        self.save: Callable[..., Any] = torch.save
        self.load: Callable[..., Any] = torch.load

    def loader(self, loader: Any) -> Any:
        return loader


def attach(model: torch.nn.Module, optimizer: Any, loss_fn: Optional[Callable[[torch.nn.Module, Any], Any]] = None,
           sampler: Any = None, scheduler: Any = None, scaler: Any = None) -> Any:
    """Call after DDP(...). Returns a Passthrough unless DDP_PROFILE_RUN is set (and torch >= 2.0)."""
    cfg = env.read()
    if cfg is None:
        return Passthrough()
    c = current()
    if c is not None:  # ddp_profile.auto attached first (the script calls attach after its first forward)
        c.hand(loss_fn, sampler, scheduler, scaler)
        return c
    env.check_format()
    if not hasattr(optimizer, "register_step_pre_hook"):
        sys.stderr.write("ddp_profile: torch %s has no optimizer step hooks (needs >= 2.0): not recording\n"
                         % torch.__version__)
        return Passthrough()
    auto.install()  # already there when ddp_profile started the job; patched now when the script imported us later
    return auto.attach_explicit(cfg, model, optimizer, loss_fn, sampler, scheduler, scaler)
