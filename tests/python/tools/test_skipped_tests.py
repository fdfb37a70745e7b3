"""scripts/skipped_tests.py: test.sh's list of skipped tests names each once, with its GTEST_SKIP message."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "skipped_tests.py")

LOG = """[ RUN      ] Torchrun.Runs
/src/tests/integration/test_torchrun.cpp:40: Skipped
no torchrun: set DDP_TORCHRUN
(bash scripts/torchrun_venv.sh)
[  SKIPPED ] Torchrun.Runs (0 ms)
[ RUN      ] Other.Passes
[       OK ] Other.Passes (1 ms)
[ RUN      ] Slurm.Srun
/src/tests/integration/test_slurm.cpp:12: Skipped
SKIPPED LOUDLY: no slurmctld
[  SKIPPED ] Slurm.Srun (0 ms)
[  SKIPPED ] Torchrun.Runs
"""


def run(tmp_path, text: str) -> str:
    log = tmp_path / "LastTest.log"
    log.write_text(text)
    return subprocess.run([sys.executable, SCRIPT, str(log)], capture_output=True, text=True, check=True).stdout


def test_each_skip_once_with_its_reason(tmp_path) -> None:
    out = run(tmp_path, LOG)
    assert "2 test(s) SKIPPED" in out
    assert "Torchrun.Runs: no torchrun: set DDP_TORCHRUN (bash scripts/torchrun_venv.sh)" in out
    assert "Slurm.Srun: SKIPPED LOUDLY: no slurmctld" in out
    assert "Other.Passes" not in out


def test_nothing_skipped(tmp_path) -> None:
    assert run(tmp_path, "[ RUN      ] A.B\n[       OK ] A.B (0 ms)\n").strip() == "test.sh: no test skipped"
