#!/usr/bin/env bash
# Installs PyPI's torch (default 2.11.0, the cu130 wheel, run on the CPU here) into the venv VENV: the wheel itself
# without its CUDA dependencies (gigabytes a CPU run never loads), torch's pure-Python dependencies (each named, all
# with --no-deps, so pip does not weigh torch's CUDA requirements against them), and the three nvidia packages torch
# imports at startup that the CUDA toolkit's lib64 lacks (that lib64 goes on LD_LIBRARY_PATH for the rest). The wheel
# file is fetched once into DDP_CACHE/wheels, which build_cuda_tier.sh unpacks its LibTorch from. Used by
# torchrun_venv.sh (the tests' venv) and test_wheel.sh (a fresh user's venv).
#
#   bash scripts/torch_into_venv.sh VENV
set -euo pipefail
V=${1:?usage: torch_into_venv.sh VENV}
version=${DDP_TORCH_VERSION:-2.11.0}
cache=${DDP_CACHE:-$HOME/.cache/ddp_profile}
mkdir -p "$cache/wheels"
wheel=$(ls "$cache"/wheels/torch-"$version"-*manylinux*x86_64.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 --implementation cp "torch==$version" -d "$cache/wheels"
  wheel=$(ls "$cache"/wheels/torch-"$version"-*manylinux*x86_64.whl | head -1)
fi
"$V/bin/pip" install --quiet --no-deps "$wheel"
"$V/bin/pip" install --quiet --no-deps typing_extensions sympy mpmath filelock jinja2 networkx fsspec markupsafe numpy
"$V/bin/pip" install --quiet --no-deps nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 "nvidia-cufile==1.15.*"
