"""ddp_profile's Python companion: records what a PyTorch DDP script does, for `ddp_profile --check/--record`.

Under ddp_profile it needs no line in the script (ddp_profile.auto). A script may still call

    dp = ddp_profile.attach(model, optimizer, loss_fn=..., sampler=..., scheduler=..., scaler=...)

to hand over what the companion cannot find (the loss, for the single-process reference); dp.loader(loader),
dp.save(state, path) and dp.load(path) are there for scripts that want them, and nothing depends on them.
Without DDP_PROFILE_RUN in the environment, attach returns a passthrough and installs nothing."""
from .attach import Passthrough, __version__, attach
from .companion import Companion

__all__ = ["attach", "Companion", "Passthrough", "__version__"]
