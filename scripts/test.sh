#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs every test: unit tests, integration tests with real ranks over
# Gloo on loopback, viewer tests under Xvfb. Then the LibTorch-free layers (traces/, profiler/: readers, recorder,
# analysis) again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The torchrun integration tests run when scripts/torchrun_venv.sh has created its venv (they skip otherwise).
torchrun_bin=${DDP_CACHE:-$HOME/.cache/ddp_profile}/torchvenv/bin/torchrun
if [ -z "${DDP_TORCHRUN:-}" ] && [ -x "$torchrun_bin" ]; then export DDP_TORCHRUN=$torchrun_bin; fi
(cd build && ctest --output-on-failure --timeout 900 -j1)

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDDP_PROFILE_SANITIZE=ON -DDDP_PROFILE_RUNTIME=OFF \
  -DDDP_PROFILE_VIEWER=OFF -DDDP_PROFILE_BENCH=OFF > /dev/null
cmake --build build-asan -j 2 --target traces_tests profiler_tests
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --output-on-failure --timeout 900 -j1)
