// The atomic JSON file writer behind both exports: a body that throws leaves neither the target nor a temp file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "traces/base/json_out.h"

namespace fs = std::filesystem;
using namespace ddp;

TEST(JsonOut, AThrowingBodyLeavesThePreviousFileAndNoTempFile) {
  const fs::path d = fs::temp_directory_path() / ("ddp_json_out_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string path = (d / "out.json").string();
  std::ofstream(path) << "previous";
  uint64_t bytes = 0;
  std::string err;
  EXPECT_FALSE(write_json_file_atomically(
      path,
      [](JsonOut& o) {
        o.raw("{\"half\": ");
        throw std::runtime_error("the input went bad");
      },
      bytes, err));
  EXPECT_NE(err.find("the input went bad"), std::string::npos) << err;
  EXPECT_NE(err.find("out.json"), std::string::npos) << err;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "previous");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "no temp file left";

  // An abandoned body is no different.
  EXPECT_FALSE(write_json_file_atomically(
      path, [](JsonOut& o) { o.abandon(); }, bytes, err));
  files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  fs::remove_all(d);
}
