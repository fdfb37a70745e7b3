#pragma once
// The torch >= 2 venv some integration tests run PyTorch itself from. DDP_TORCHRUN names its torchrun
// (scripts/torchrun_venv.sh creates the venv; scripts/test.sh sets the variable when it exists); without it those
// tests skip, saying why.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

namespace ddptest {

inline const char* kNoTorchrun =
    "set DDP_TORCHRUN=/path/to/bin/torchrun (torch >= 2) to run this; scripts/torchrun_venv.sh creates one in "
    "~/.cache/ddp_profile/torchvenv";

// The torchrun DDP_TORCHRUN names, or "" when it is unset or not there.
inline std::string venv_torchrun() {
  const char* t = std::getenv("DDP_TORCHRUN");
  std::error_code ec;
  return t && *t && std::filesystem::exists(t, ec) ? t : "";
}

// The venv's torch needs its nvidia-* libraries and the toolkit's on the library path (docs/quickstart.md).
inline std::map<std::string, std::string> venv_env(const std::filesystem::path& torchrun) {
  namespace fs = std::filesystem;
  std::string libs = "/usr/local/cuda/lib64";
  const fs::path nvidia = torchrun.parent_path().parent_path() / "lib" / "python3.11" / "site-packages" / "nvidia";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(nvidia, ec))
    if (fs::is_directory(e.path() / "lib")) libs += ":" + (e.path() / "lib").string();
  if (const char* old = std::getenv("LD_LIBRARY_PATH")) libs += std::string(":") + old;
  return {{"LD_LIBRARY_PATH", libs}};
}

}  // namespace ddptest
