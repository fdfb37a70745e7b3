#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs every test: unit tests, integration tests with real ranks over
# Gloo on loopback, viewer tests under Xvfb, the companion's tests, the wheel installed into a fresh venv and used
# there. Then the LibTorch-free layers (traces/, profiler/: readers, recorder, analysis) again under
# AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# PyPI's torch in a venv (created once, cached): the real torchrun, torch.profiler and the companion's tests run
# against it. Without a reachable registry those tests skip, each saying so.
# DDP_OFFLINE=1: no download (a venv made before is still used).
torchrun_bin=${DDP_CACHE:-$HOME/.cache/ddp_profile}/torchvenv/bin/torchrun
if [ "${DDP_OFFLINE:-0}" = 1 ]; then
  [ -x "$torchrun_bin" ] || echo "test.sh: DDP_OFFLINE=1 and no torch venv: the torchrun, live-Kineto, interop and companion tests will skip"
else
  bash scripts/torchrun_venv.sh > /dev/null ||
    echo "test.sh: SKIPPING the torchrun, live-Kineto, interop and companion tests: no torch venv (PyPI unreachable?)"
fi
if [ -z "${DDP_TORCHRUN:-}" ] && [ -x "$torchrun_bin" ]; then export DDP_TORCHRUN=$torchrun_bin; fi
ctest_rc=0
(cd build && ctest --output-on-failure --timeout 900 -j1) || ctest_rc=$?
# Every skipped test and why, in one place (their GTEST_SKIP messages, from ctest's log).
python3 scripts/skipped_tests.py build/Testing/Temporary/LastTest.log
[ "$ctest_rc" = 0 ] || exit "$ctest_rc"

# The Python companion (python/ddp_profile): its own tests, under the torch venv when there is one (real torchrun,
# torch 2.11), and under Debian's torch 1.13 (it must import there and do nothing).
venv_python=${DDP_CACHE:-$HOME/.cache/ddp_profile}/torchvenv/bin/python
if [ -x "$venv_python" ]; then
  "$venv_python" -m pytest --version > /dev/null 2>&1 || "$venv_python" -m pip install --quiet pytest
  timeout 900 "$venv_python" -m pytest -q -rs tests/python/companion
  # The Python lint gate (ruff.toml: pyflakes' rules), with PyPI's ruff beside pytest.
  "$venv_python" -m ruff --version > /dev/null 2>&1 || "$venv_python" -m pip install --quiet ruff
  "$venv_python" -m ruff check --no-cache python tests/python tests/wheel scripts bench examples
else
  echo "test.sh: no torch venv: the Python lint gate (ruff) is skipped"
fi
timeout 900 /usr/bin/python3 -m pytest -q -rs tests/python/companion tests/python/tools

# The wheel as users install it: built, installed into a fresh venv with PyPI's torch alone, used there
# (scripts/test_wheel.sh, tests/wheel). Its build tools and that venv's packages come from PyPI.
if [ "${DDP_OFFLINE:-0}" = 1 ]; then
  echo "test.sh: DDP_OFFLINE=1: SKIPPING the wheel test (its build tools and fresh venv come from PyPI)"
else
  bash scripts/test_wheel.sh
fi

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDDP_PROFILE_SANITIZE=ON -DDDP_PROFILE_RUNTIME=OFF \
  -DDDP_PROFILE_VIEWER=OFF -DDDP_PROFILE_BENCH=OFF > /dev/null
cmake --build build-asan -j 2 --target traces_tests profiler_tests
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --output-on-failure --timeout 900 -j1)
