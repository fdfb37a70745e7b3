// Bad input found before any rank starts: exit 2, one line naming the file, no rank trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;
using ddptest::kExe;

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(BadInputUpFront, AMissingModelFileStopsRecordAndCheckBeforeAnyRank) {
  std::string d = ddptest::fresh_dir("nomodel");
  for (const char* mode : {"--record", "--check"}) {
    auto r = ddptest::run({kExe, mode, "--out", d + mode, "--model", d + "/missing.pt"}, d + mode + ".log", 120);
    EXPECT_EQ(r.code, 2) << mode << "\n" << r.output;
    EXPECT_NE(r.output.find("--model " + d + "/missing.pt"), std::string::npos) << r.output;
    EXPECT_EQ(lines(r.output), 1u) << "one line, not a failure per check\n" << r.output;
    EXPECT_FALSE(fs::exists(d + mode + "/rank0.ddpt")) << "no rank started";
    EXPECT_FALSE(fs::exists(d + mode + "/main/rank0.ddpt")) << "no rank started";
  }
}

TEST(BadInputUpFront, ADamagedCheckpointIsRefusedBeforeAnyRank) {
  std::string d = ddptest::fresh_dir("damagedckpt");
  auto first = ddptest::run({kExe, "--record", "--out", d, "--max-steps", "4", "--checkpoint-steps", "2"}, d + ".log");
  ASSERT_EQ(first.code, 0) << first.output;
  const std::string ckpt = d + "/checkpoints/step2";
  const std::string file = ckpt + "/rank1.pt";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
    f.put('\x5a');  // one byte changed
  }
  for (const char* mode : {"--record", "--check"}) {
    std::string out = d + "-resume" + mode;
    auto r = ddptest::run({kExe, mode, "--out", out, "--resume-from", ckpt}, out + ".log", 120);
    EXPECT_EQ(r.code, 2) << mode << "\n" << r.output;
    EXPECT_NE(r.output.find(file + " is damaged (checksum mismatch)"), std::string::npos) << r.output;
    EXPECT_EQ(lines(r.output), 1u) << r.output;
    EXPECT_FALSE(fs::exists(out + "/rank0.ddpt")) << "no rank started";
  }
  // A checkpoint folder that lacks a rank's file is refused the same way.
  fs::remove(ckpt + "/rank1.pt");
  auto r = ddptest::run({kExe, "--record", "--out", d + "-missing", "--resume-from", ckpt}, d + "-missing.log", 120);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("rank1.pt is missing"), std::string::npos) << r.output;
}

}  // namespace
