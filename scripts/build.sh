#!/usr/bin/env bash
# Configure and build everything into build/ (Release with debug info). Two cores: LibTorch translation units are
# heavy, so the build runs with -j2 at most.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$(nproc 2>/dev/null | awk '{print ($1 > 2) ? 2 : $1}')"
