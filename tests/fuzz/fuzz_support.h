#pragma once
// What the fuzz targets share: the input written to a file of a fresh temp folder, for readers that take a path.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace ddpfuzz {

// TMP/ddp_fuzz_<pid>/<name> holding `data`; the folder is made once per process and reused.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("ddp_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string path = (dir / name).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

inline std::string input_dir() { return std::filesystem::path(write_input(".probe", nullptr, 0)).parent_path(); }

}  // namespace ddpfuzz
