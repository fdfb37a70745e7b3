#!/usr/bin/env bash
# Installs PyPI's torch (default 2.11.0, the cu130 wheel, run on the CPU here) into the venv VENV: the wheel itself
# without its CUDA dependencies (gigabytes a CPU run never loads), torch's pure-Python dependencies (each named, all
# with --no-deps, so pip does not weigh torch's CUDA requirements against them), and the three nvidia packages torch
# imports at startup that the CUDA toolkit's lib64 lacks (that lib64 goes on LD_LIBRARY_PATH for the rest). The wheel
# file comes from torch_wheel.sh (fetched once, shared with build_cuda_tier.sh). Used by
# torchrun_venv.sh (the tests' venv) and test_wheel.sh (a fresh user's venv).
#
#   bash scripts/torch_into_venv.sh VENV
set -euo pipefail
V=${1:?usage: torch_into_venv.sh VENV}
wheel=$(bash "$(dirname "$0")/torch_wheel.sh")
"$V/bin/pip" install --quiet --no-deps "$wheel"
"$V/bin/pip" install --quiet --no-deps typing_extensions sympy mpmath filelock jinja2 networkx fsspec markupsafe numpy
"$V/bin/pip" install --quiet --no-deps nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 "nvidia-cufile==1.15.*"
