"""ddp_profile's Python companion: records what a PyTorch DDP script does, for `ddp_profile --check/--record`.

    dp = ddp_profile.attach(model, optimizer, loss_fn=..., sampler=..., scheduler=..., scaler=...)
    for batch in dp.loader(loader): ...
    dp.save(state, path); state = dp.load(path)

Without DDP_PROFILE_RUN in the environment, attach returns a passthrough and installs nothing."""
from .attach import Companion, Passthrough, __version__, attach

__all__ = ["attach", "Companion", "Passthrough", "__version__"]
