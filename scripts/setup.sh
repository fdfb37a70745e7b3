#!/usr/bin/env bash
# Installs the Debian packages the build needs (skipped when they are all present; scripts/debian_packages.sh names
# them), then configures and builds everything into build/. Extra arguments go to CMake (e.g.
# -DDDP_PROFILE_SANITIZE=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/debian_packages.sh
install_debian_packages "${full_packages[@]}"
bash scripts/build.sh "$@"
