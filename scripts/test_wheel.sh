#!/usr/bin/env bash
# The wheel tested as users install it: builds it (scripts/build_wheel.sh), installs it into a fresh venv that has
# PyPI's torch and nothing else (scripts/torch_into_venv.sh), and runs tests/wheel against that venv from a folder
# outside this checkout: ldd of every executable and bundled library, the entry points, the companion's import,
# --check and --record of an example script under torchrun, --analyze of the run and ddp_viewer --screenshot under
# Xvfb. Run by scripts/test.sh; needs PyPI (the build tools, torch's dependencies) unless they are cached.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(bash scripts/build_wheel.sh)
work=$(mktemp -d /tmp/ddp_wheel_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
bash scripts/torch_into_venv.sh "$work/venv"
"$work/venv/bin/pip" install --quiet "$wheel"
policy=$(ls "${DDP_CACHE:-$HOME/.cache/ddp_profile}"/wheeltools/lib/python3*/site-packages/auditwheel/policy/manylinux-policy.json)
DDP_WHEEL_VENV=$work/venv DDP_WHEEL_FILE=$wheel DDP_MANYLINUX_POLICY=$policy DDP_WHEEL_WORK=$work \
  timeout 1200 /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/wheel
