#!/usr/bin/env bash
# Opt-in: compile and link the CUDA tier (DDP_PROFILE_CUDA=ON, CUPTI, NVTX) against a CUDA-enabled LibTorch, on a
# machine that needs no GPU. The LibTorch is PyPI's torch wheel (default 2.11.0, built for CUDA 13.0 like the
# reference GPU machine's torch 2.11 cu130): its package carries the headers, the shared libraries and
# share/cmake/Torch. The wheel is fetched once with pip into a cache folder and unpacked there (include/, lib/,
# share/ only: ~1 GB). The CUDA toolkit (nvcc, CUPTI, NVTX3, cuDNN, NCCL) must be installed (/usr/local/cuda).
#
#   bash scripts/build_cuda_tier.sh              # fetch (first time), configure build-cuda/, build, run CPU-safe tests
#   DDP_TORCH_DIR=/path/to/share/cmake/Torch bash scripts/build_cuda_tier.sh   # use a LibTorch you already have
#
# Environment: DDP_CACHE (default ~/.cache/ddp_profile), DDP_TORCH_VERSION (2.11.0), DDP_CUDA_BUILD (build-cuda),
# JOBS (1: LibTorch translation units take ~1-2 GB each), DDP_CUDA_TARGETS (what to build).
#
# Linking note: libtorch_cuda.so needs libcusparseLt, libnvshmem_host and libcufile, which PyPI ships as separate
# packages and the toolkit here lacks. The executables are linked with --allow-shlib-undefined (every symbol *our* code
# uses must still resolve); to run them here the script then fetches those packages too (below) and runs every test
# binary of the tier on the CPU path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${DDP_TORCH_VERSION:-2.11.0}
cache=${DDP_CACHE:-$HOME/.cache/ddp_profile}
build=${DDP_CUDA_BUILD:-build-cuda}
jobs=${JOBS:-1}
# traces_tests are not among them: traces/ builds without CUDA or LibTorch, so the tier would compile and run the
# main build's tests again, identically (about 7 minutes of CI on 2 cores).
targets=${DDP_CUDA_TARGETS:-"ddp_profile profiler_tests runtime_tests integration_tests span_bench"}

torch_dir=${DDP_TORCH_DIR:-}
if [ -z "$torch_dir" ]; then
  dest=$cache/libtorch-$version
  torch_dir=$dest/torch/share/cmake/Torch
  if [ ! -f "$torch_dir/TorchConfig.cmake" ]; then
    # A registry that cannot be reached is not a compile failure: exit 3 so callers can tell the two apart.
    wheel=$(bash scripts/torch_wheel.sh) || { echo "build_cuda_tier: CUDA tier not compiled" >&2; exit 3; }
    echo "build_cuda_tier: unpacking $(basename "$wheel") into $dest"
    rm -rf "$dest.partial"
    mkdir -p "$dest.partial"
    python3 - "$wheel" "$dest.partial" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith(("torch/include/", "torch/lib/", "torch/share/")) or n == "torch/version.py"]
    for n in names:
        z.extract(n, out)
print(f"{len(names)} files")
PY
    rm -rf "$dest"
    mv "$dest.partial" "$dest"
  fi
fi
grep -q "cuda" "$torch_dir/../../../version.py" 2>/dev/null && sed -n "s/^__version__ = /build_cuda_tier: LibTorch /p" "$torch_dir/../../../version.py" || true

cuda_root=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda_root/bin:$PATH"
# Pin every piece of the wheel's LibTorch: TorchConfig's find_library/find_package would otherwise prefer a system
# LibTorch (Debian's libtorch-dev, in CMake's system paths) over its own PATHS and mix 1.13 and 2.x.
torch_lib=$(cd "$torch_dir/../../../lib" && pwd)
cmake -S . -B "$build" -G Ninja \
  -DTorch_DIR="$torch_dir" \
  -DCaffe2_DIR="$torch_dir/../Caffe2" \
  -DTORCH_LIBRARY="$torch_lib/libtorch.so" \
  -DC10_CUDA_LIBRARY="$torch_lib/libc10_cuda.so" \
  -Dc10_LIBRARY="$torch_lib/libc10.so" \
  -DCAFFE2_NVRTC_LIBRARY="$torch_lib/libcaffe2_nvrtc.so" \
  -DDDP_PROFILE_CUDA=ON \
  -DDDP_PROFILE_VIEWER=OFF \
  -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--allow-shlib-undefined" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
# shellcheck disable=SC2086
nice ninja -C "$build" -j"$jobs" $targets
# The device check's peak-bandwidth probe is plain CUDA C++: compile it too, so it cannot rot either.
nvcc -O2 -o "$build/gpu_peaks" bench/gpu_peaks.cu
echo "build_cuda_tier: built $targets and gpu_peaks in $build"

# libtorch_cuda needs libcufile, libcusparseLt and libnvshmem_host at run time, which PyPI ships as separate nvidia-*
# packages and the toolkit here lacks. Unpacked beside the wheel's torch/ they are found through libtorch's own RPATH
# ($ORIGIN/../../nvidia/...), exactly as in a pip install: then the CUDA-tier binaries start here and take their CPU
# path, so the whole runtime is tested against LibTorch 2.x, not only compiled.
runtime_libs() {
  [ -n "${dest:-}" ] || return 1  # a LibTorch given by DDP_TORCH_DIR brings its own
  [ -f "$dest/nvidia/.complete" ] && return 0
  local meta pins
  meta=$(python3 - "$(bash scripts/torch_wheel.sh)" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
for line in meta.splitlines():
    if line.startswith("Requires-Dist: nvidia-cusparselt") or line.startswith("Requires-Dist: nvidia-nvshmem"):
        print(line.split()[1].split(";")[0])
PY
) || return 1
  # cuda-toolkit[cufile]==13.0.2 (the wheel's pin) resolves to nvidia-cufile 1.15.
  pins="$meta nvidia-cufile==1.15.*"
  echo "build_cuda_tier: fetching the run-time libraries libtorch_cuda needs: $(echo $pins)"
  mkdir -p "$cache/runtime-wheels"
  # shellcheck disable=SC2086
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --python-version 3.11 --implementation cp \
    $pins -d "$cache/runtime-wheels" || return 1
  for w in "$cache"/runtime-wheels/*.whl; do
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("nvidia/")])' "$w" "$dest"
  done
  touch "$dest/nvidia/.complete"
}

if [ "${DDP_CUDA_RUN_TESTS:-1}" = 1 ]; then
  if ldd "$build/runtime/ddp_profile_runtime" | grep -q "not found"; then runtime_libs || true; fi
  if ! ldd "$build/runtime/ddp_profile_runtime" | grep -q "not found"; then
    # Everything runs: the CUDA build without a GPU says why and takes the CPU path (Gloo, real ranks on loopback).
    for t in profiler_tests runtime_tests integration_tests; do
      if [ -x "$build/tests/$t" ]; then "$build/tests/$t" --gtest_brief=1; fi
    done
  else
    # Without the nvidia-* run-time libraries (no registry) only the LibTorch-free binaries can start; they still
    # check that CUPTI and NVTX compiled in fail gracefully without a GPU.
    echo "build_cuda_tier: the nvidia-* run-time libraries are missing; running the LibTorch-free tests only"
    "$build/tests/profiler_tests" --gtest_brief=1
  fi
fi
