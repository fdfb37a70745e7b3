#!/usr/bin/env bash
# Installs the Debian packages the build needs (skipped when they are all present), then configures and builds
# everything into build/. Extra arguments go to CMake (e.g. -DDDP_PROFILE_SANITIZE=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libgloo-dev libopenblas0-pthread
  libcli11-dev nlohmann-json3-dev libzstd-dev zlib1g-dev libsimdjson-dev libdeflate-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri xvfb xauth
  python3 python3-numpy python3-torch python3-pytest
  protobuf-compiler clang-format
  slurmctld slurmd slurm-client munge nftables
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
bash scripts/build.sh "$@"
