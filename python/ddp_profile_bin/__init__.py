"""The console entry points of the ddp_profile wheel: `ddp_profile` and `ddp_viewer` on the venv's PATH run the native
executables installed beside this file (CMake's install step puts them here, auditwheel their libraries in
ddp_profile.libs/).

A package of its own, apart from the companion: importing `ddp_profile` imports torch (seconds), and the trace
commands must start in milliseconds. Each entry point replaces this Python process with the executable (execv), so
signals, exit codes and standard streams are the executable's own."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run(name: str) -> None:
    exe = os.path.join(_HERE, name)
    if not os.access(exe, os.X_OK):
        sys.stderr.write("%s: the executable %s is not installed (this ddp_profile_bin comes from a source tree, not "
                         "from the wheel: build it, README)\n" % (name, exe))
        sys.exit(2)
    os.execv(exe, [name] + sys.argv[1:])


def ddp_profile() -> None:
    _run("ddp_profile")


def ddp_viewer() -> None:
    _run("ddp_viewer")
