// The test binaries' main (tests/support/test_main.cpp) gives each test process a temporary folder of its own, which
// every test's fresh folders and files go under: a suite run leaves nothing behind in /tmp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

TEST(TestTempFolder, TemporaryFilesGoToAFolderOfThisTestProcess) {
  const std::string tmp = std::filesystem::temp_directory_path().string();
  EXPECT_NE(tmp.find("/ddp_test."), std::string::npos) << tmp;
  const char* env = std::getenv("TMPDIR");  // what the ranks and scripts a test starts inherit
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(std::filesystem::path(env), std::filesystem::path(tmp)) << env;
  EXPECT_TRUE(std::filesystem::is_directory(tmp));
}
