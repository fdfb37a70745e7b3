# The Debian 12 packages the builds need, named once; sourced by setup.sh (everything) and build_wheel.sh (the
# tools alone), which install the missing ones with install_debian_packages.
#
# ddp_profile and ddp_viewer without LibTorch: what the wheel holds.
tool_packages=(
  build-essential cmake ninja-build pkg-config ccache
  libcli11-dev nlohmann-json3-dev libzstd-dev zlib1g-dev libsimdjson-dev libdeflate-dev
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri xvfb xauth
)
# The rest of the source build and its tests: our own job (LibTorch, Gloo), the test and benchmark libraries, the
# numerics references, the launchers.
full_packages=(
  "${tool_packages[@]}"
  libtorch-dev libgloo-dev libopenblas0-pthread
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-torch python3-pytest
  protobuf-compiler clang-format universal-ctags
  slurmctld slurmd slurm-client munge nftables
)

# Installs those of the given packages that are missing (apt, as root or through sudo).
install_debian_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
}
