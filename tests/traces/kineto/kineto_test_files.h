#pragma once
// The committed PyTorch 2.11 traces (tests/data/kineto, see tests/data/README.md) as the Kineto tests find them, and a
// fresh folder per test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace ddptest {

inline const std::string kKinetoData = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto";
inline const std::string kKinetoCpu = kKinetoData + "/pytorch-2.11-cpu";

// TMP/ddp_kineto_<name>_<pid>, empty.
inline std::string kineto_temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ddp_kineto_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// The scenario's trace of `rank` (the file name starts with rank<R>.).
inline std::string kineto_rank_file(const std::string& scenario, int rank) {
  for (const auto& e : std::filesystem::directory_iterator(kKinetoCpu + "/" + scenario))
    if (e.path().filename().string().rfind("rank" + std::to_string(rank) + ".", 0) == 0) return e.path().string();
  ADD_FAILURE() << "no rank " << rank << " trace in " << scenario;
  return {};
}

}  // namespace ddptest
