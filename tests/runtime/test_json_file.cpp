// Run-folder JSON (manifest, run_status, checks) is written whole or not at all, and a failed write is reported.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/common/json_file.h"
#include "tests/support/remove_tree.h"

namespace {
namespace fs = std::filesystem;

TEST(JsonFile, WritesWholeReplacesAtomicallyAndReportsFailure) {
  const fs::path d = fs::temp_directory_path() / ("ddp_json_" + std::to_string(::getpid()));
  ddp::testing::remove_tree(fs::path(d).string());
  fs::create_directories(d);
  const std::string path = (d / "status.json").string();
  std::string err;
  ASSERT_TRUE(ddp::write_json_atomic(path, {{"exit_code", 0}}, err)) << err;
  ASSERT_TRUE(ddp::write_json_atomic(path, {{"exit_code", 1}, {"culprit", 1}}, err)) << err;
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  EXPECT_EQ(j["culprit"], 1);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "no temporary file is left behind";

  // A folder that cannot be written: false with a reason, and the previous file untouched.
  EXPECT_FALSE(ddp::write_json_atomic((d / "missing" / "x.json").string(), {{"a", 1}}, err));
  EXPECT_NE(err.find("cannot write"), std::string::npos) << err;
  ddp::testing::remove_tree(fs::path(d).string());
}
}  // namespace
