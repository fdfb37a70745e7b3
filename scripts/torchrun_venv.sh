#!/usr/bin/env bash
# Opt-in: a Python venv with PyPI's torch (default 2.11.0) for the torchrun integration tests
# (tests/integration/test_torchrun.cpp). Only torchrun runs from it: our workers never load its libraries, and
# torchrun itself runs on the CPU, so the CUDA wheels' few runtime packages that torch imports are all it needs
# besides torch's pure-Python dependencies. Created once in the cache folder build_cuda_tier.sh uses; prints the
# torchrun path. scripts/test.sh sets DDP_TORCHRUN to it when the venv exists (it never creates it).
#
#   bash scripts/torchrun_venv.sh
#   DDP_TORCHRUN=$HOME/.cache/ddp_profile/torchvenv/bin/torchrun build/tests/integration_tests --gtest_filter='Torchrun*'
#
# Environment: DDP_CACHE (default ~/.cache/ddp_profile), DDP_TORCH_VERSION (2.11.0).
set -euo pipefail
version=${DDP_TORCH_VERSION:-2.11.0}
cache=${DDP_CACHE:-$HOME/.cache/ddp_profile}
V=$cache/torchvenv
if [ ! -x "$V/bin/torchrun" ]; then
  mkdir -p "$cache"
  python3 -m venv "$V"
  "$V/bin/pip" install --no-deps "torch==$version"
  "$V/bin/pip" install typing_extensions sympy mpmath filelock jinja2 networkx fsspec markupsafe numpy
  "$V/bin/pip" install --no-deps nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 "nvidia-cufile==1.15.*"
fi
echo "$V/bin/torchrun"
