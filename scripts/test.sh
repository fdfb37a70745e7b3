#!/usr/bin/env bash
# Builds, then runs every test (unit, integration with real ranks over Gloo on loopback, viewer under Xvfb).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j1
