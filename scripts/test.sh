#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs every test: unit tests, integration tests with real ranks over
# Gloo on loopback, viewer tests under Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
ctest --output-on-failure --timeout 900 -j1
