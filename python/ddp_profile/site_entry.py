"""The companion's way into a script nobody edited. `ddp_profile --check/--record -- LAUNCH...` copies this file as
<run>/companion/sitecustomize.py, beside its own copy of the package, and puts that folder first on the job's
PYTHONPATH: every Python process of the job (torchrun's agent, each rank, a rank Lightning or `accelerate launch`
starts) runs it at startup. It is pure standard library and imports nothing heavy: it only waits for `torch` to be
imported, then lets ddp_profile.auto patch the few places where a DDP job shows itself. A sitecustomize the
environment had before (ours shadows it) still runs."""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _install_auto() -> None:
    try:
        from ddp_profile import auto

        auto.install()
    except Exception as e:  # noqa: BLE001  (the user's job runs on without the companion, and says so)
        sys.stderr.write("ddp_profile: the companion could not install itself: %s: %s\n" % (type(e).__name__, e))


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when `torch` is first imported it wraps torch's loader so that the companion installs
    right after torch has finished importing (not before: it patches torch's classes)."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_install(module):  # type: ignore[no-untyped-def]
            exec_module(module)
            _install_auto()

        loader.exec_module = exec_then_install
        return spec


def _run_shadowed_sitecustomize() -> None:
    """The sitecustomize the environment would have run without ours (Debian's, a conda env's), run once."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001  (as Python itself does with a failing sitecustomize)
        sys.stderr.write("Error in sitecustomize (%s); set PYTHONVERBOSE for traceback:\n%s: %s\n"
                         % (spec.origin, type(e).__name__, e))


def _env_run_name() -> str:
    """layout.ENV_RUN, read from the package file beside this one without importing the package (which imports
    torch)."""
    spec = importlib.util.spec_from_file_location("_ddp_profile_layout", os.path.join(_HERE, "ddp_profile", "layout.py"))
    if spec is None or spec.loader is None:
        return ""
    layout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layout)
    return str(layout.ENV_RUN)


_name = _env_run_name() if os.path.isdir(os.path.join(_HERE, "ddp_profile")) else ""
if _name and os.environ.get(_name, "").strip():
    if "torch" in sys.modules:
        _install_auto()
    else:
        sys.meta_path.insert(0, _AfterTorch())
_run_shadowed_sitecustomize()
