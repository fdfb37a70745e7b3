#!/usr/bin/env bash
# Pack the CUDA tier built here (scripts/build_cuda_tier.sh) for a GPU machine that cannot build it: the reference GPU
# machine has PyTorch 2.11 cu130, CMake, ninja and nvcc but not the system headers this project builds against
# (libgloo-dev, libzstd-dev, nlohmann-json, CLI11, GoogleTest) and no network. The binaries link the same PyPI LibTorch
# that machine's python3 holds, so bench/device_check.sh runs them there against that package's libraries.
#
#   bash bench/device_bundle.sh          # -> .device/ (ignored by git; name it in the device tool's carry)
#
# Environment: DDP_CUDA_BUILD (default build-cuda), DDP_BUNDLE (default .device).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DDP_CUDA_BUILD:-build-cuda}
bundle=${DDP_BUNDLE:-.device}
need=(runtime/ddp_profile runtime/ddp_profile_runtime tests/profiler_tests tests/runtime_tests)

missing=0
for f in "${need[@]}"; do [ -x "$build/$f" ] || missing=1; done
if [ "$missing" = 1 ]; then
  echo "device_bundle: building the CUDA tier in $build first"
  DDP_CUDA_BUILD=$build DDP_CUDA_TARGETS="ddp_profile profiler_tests runtime_tests" DDP_CUDA_RUN_TESTS=0 \
    bash scripts/build_cuda_tier.sh
fi
# A bundle must hold this checkout's code: rebuild what is stale (no-op when up to date).
nice ninja -C "$build" -j"${JOBS:-1}" ddp_profile profiler_tests runtime_tests > /dev/null

rm -rf "$bundle"
mkdir -p "$bundle"
for f in "${need[@]}"; do
  # Debug info is most of the size; the device tool carries at most 64 MiB with the working tree.
  strip --strip-debug -o "$bundle/$(basename "$f")" "$build/$f"
done
# The system libraries the binaries load beyond glibc and the PyTorch package (the GPU machine has Debian's glibc
# generation but not these): carried in lib/, which device_check.sh puts on LD_LIBRARY_PATH.
mkdir -p "$bundle/lib"
for f in "${need[@]}"; do ldd "$build/$f"; done | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}' | sort -u |
  grep -E '/lib(deflate|simdjson|stb|zstd|z)\.so' | while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
nvcc -O2 -o "$bundle/gpu_peaks" bench/gpu_peaks.cu
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with local changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) with $(g++ --version | head -1)"
  sed -n 's/^Torch_DIR:PATH=/Torch_DIR /p' "$build/CMakeCache.txt"
} > "$bundle/BUILD_INFO"
size=$(du -sm "$bundle" | cut -f1)
echo "device_bundle: $bundle holds $(ls "$bundle" | tr '\n' ' ')(${size} MiB)"
if [ "$size" -gt 56 ]; then
  echo "device_bundle: $size MiB leaves too little of the device tool's 64 MiB for the working tree" >&2
  exit 1
fi
