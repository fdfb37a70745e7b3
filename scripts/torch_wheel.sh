#!/usr/bin/env bash
# Prints the path of PyPI's torch wheel (DDP_TORCH_VERSION, default 2.11.0; manylinux x86-64, CPython 3.11), fetched
# once into DDP_CACHE/wheels (~530 MB) and taken from there after. The one copy both users read:
# torch_into_venv.sh installs it into a venv, build_cuda_tier.sh unpacks its LibTorch. Exits non-zero, saying so,
# when PyPI cannot be reached.
set -euo pipefail
version=${DDP_TORCH_VERSION:-2.11.0}
wheels=${DDP_CACHE:-$HOME/.cache/ddp_profile}/wheels
cached() { ls "$wheels"/torch-"$version"-*manylinux*x86_64.whl 2> /dev/null | head -1; }
wheel=$(cached || true)
if [ -z "$wheel" ]; then
  mkdir -p "$wheels"
  echo "torch_wheel: fetching torch==$version from PyPI (about 530 MB)" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 --implementation cp "torch==$version" -d "$wheels" >&2 ||
    { echo "torch_wheel: could not fetch torch==$version from PyPI" >&2; exit 1; }
  wheel=$(cached)
fi
echo "$wheel"
