#!/usr/bin/env bash
# A Python venv with PyPI's torch (default 2.11.0) for the torchrun integration tests
# (tests/integration/test_torchrun.cpp). Only torchrun runs from it: our workers never load its libraries, and
# torchrun itself runs on the CPU, so the CUDA wheels' few runtime packages that torch imports are all it needs
# besides torch's pure-Python dependencies. Created once in the cache folder build_cuda_tier.sh uses; prints the
# torchrun path. scripts/test.sh creates it (unless DDP_OFFLINE=1) and sets DDP_TORCHRUN to it.
#
#   bash scripts/torchrun_venv.sh
#   DDP_TORCHRUN=$HOME/.cache/ddp_profile/torchvenv/bin/torchrun build/tests/integration_tests --gtest_filter='Torchrun*'
#
# Environment: DDP_CACHE (default ~/.cache/ddp_profile), DDP_TORCH_VERSION (2.11.0), DDP_LIGHTNING_VERSION (2.6.*),
# DDP_ACCELERATE_VERSION (1.15.*), DDP_TRANSFORMERS_VERSION (5.25.*).
set -euo pipefail
cache=${DDP_CACHE:-$HOME/.cache/ddp_profile}
V=$cache/torchvenv
if [ ! -x "$V/bin/torchrun" ]; then
  mkdir -p "$cache"
  rm -rf "$V"
  python3 -m venv "$V"
  bash "$(dirname "$0")/torch_into_venv.sh" "$V"
  "$V/bin/pip" install --quiet pytest
fi
# The frameworks the unmodified-script tests run (tests/python/user_scripts/{lightning,accelerate}_job.py): without
# their own dependencies on torch (pip would fetch another torch and its CUDA wheels), with the rest of theirs.
if ! "$V/bin/python" -c "import lightning, accelerate" 2> /dev/null; then
  "$V/bin/pip" install --quiet --no-deps "lightning==${DDP_LIGHTNING_VERSION:-2.6.*}" \
    "accelerate==${DDP_ACCELERATE_VERSION:-1.15.*}" "torchmetrics<3" "lightning-utilities<2"
  "$V/bin/pip" install --quiet pyyaml psutil packaging huggingface_hub safetensors tqdm
fi
# The data-path tests' image-folder scripts (tests/python/user_scripts/datapath_job.py): torchvision for torch 2.11,
# without its dependency on torch, and pillow to decode.
if ! "$V/bin/python" -c "import torchvision, PIL" 2> /dev/null; then
  "$V/bin/pip" install --quiet --no-deps "torchvision==${DDP_TORCHVISION_VERSION:-0.26.*}" pillow
fi
# The Hugging Face Trainer tests (tests/python/user_scripts/hf_trainer_job.py): transformers without its dependency
# on torch, with the few of its own an import of the Trainer needs (tokenizers and regex are binary wheels).
if ! "$V/bin/python" -c "import transformers" 2> /dev/null; then
  "$V/bin/pip" install --quiet --no-deps "transformers==${DDP_TRANSFORMERS_VERSION:-5.25.*}"
  "$V/bin/pip" install --quiet tokenizers regex
fi
echo "$V/bin/torchrun"
