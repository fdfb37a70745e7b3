"""Tests of the Python companion alone (no C++). python/ goes on sys.path; without torch every test skips."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PYDIR = os.path.join(ROOT, "python")
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except Exception:  # noqa: BLE001
    HAVE_TORCH = False


def pytest_report_header(config):
    return "ddp_profile companion: " + ("torch " + torch.__version__ if HAVE_TORCH else
                                        "torch is not importable: every test is skipped")
