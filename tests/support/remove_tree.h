#pragma once
// Removing a test's temporary folder. Not std::filesystem::remove_all: PyPI's libtorch.so (2.x, the CUDA tier's
// LibTorch) exports its own copy of it, which the runtime tests then bind to and which crashes on a populated folder.
#include <cstdlib>
#include <string>

namespace ddp::testing {
inline void remove_tree(const std::string& path) {
  const std::string cmd = "rm -rf '" + path + "'";
  if (std::system(cmd.c_str()) != 0) {
    // Best effort: a leftover temporary folder must not fail the test that made it.
  }
}
}  // namespace ddp::testing
