// --diff on real runs: one changed variable is reported without a warning and its effect located; two distributed
// variables changed at once draw the warning.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;
using ddptest::fresh_dir;
using ddptest::kExe;

std::string record(const std::string& name, std::vector<std::string> extra) {
  std::string d = fresh_dir(name);
  std::vector<std::string> args = {kExe, "--record", "--out", d, "--verify-steps", "2", "--max-steps", "6"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = ddptest::run(args, d + ".log", 300);
  EXPECT_EQ(r.code, 0) << r.output;
  return d;
}

TEST(Diff, OneVariableIsLocatedTwoDistributedVariablesWarn) {
  std::string a = record("a", {});
  std::string lr = record("lr", {"--lr", "0.01"});
  auto r = ddptest::run({kExe, "--diff", a, lr, "--json"}, lr + ".diff.log", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = ddptest::printed_json(r.output);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_TRUE(j["config"]["warning"].is_null()) << j["config"].dump();
  bool lr_listed = false;
  for (const auto& d : j["config"]["differences"]) lr_listed |= d["key"] == "config.lr";
  EXPECT_TRUE(lr_listed) << j["config"].dump();
  ASSERT_FALSE(j["tensors"]["first_divergence"].is_null()) << "a different learning rate changes the weights";
  EXPECT_EQ(j["tensors"]["first_divergence"]["step"], 1) << "step 0 runs on identical weights; its update differs";
  EXPECT_EQ(j["replicas"]["first_step"], 0);

  std::string two = record("two", {"--batch-size", "32", "--accum-steps", "2"});
  r = ddptest::run({kExe, "--diff", a, two}, two + ".diff.log", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("WARNING"), std::string::npos) << r.output;

  r = ddptest::run({kExe, "--diff", a, a + "-missing"}, a + ".bad.log", 60);
  EXPECT_EQ(r.code, 1) << r.output;
}

// Two --check folders compare their main runs (each holds several runs; before, --diff said "nothing to compare").
TEST(Diff, CheckFoldersCompareTheirMainRuns) {
  std::string a = fresh_dir("check_a"), b = fresh_dir("check_b");
  for (auto [dir, lr] : {std::pair{a, "0.001"}, std::pair{b, "0.002"}}) {
    auto r = ddptest::run({kExe, "--check", "--checks", "env.manifest", "--out", dir, "--max-steps", "4", "--lr", lr},
                          dir + ".log", 300);
    ASSERT_EQ(r.code, 0) << r.output;
  }
  auto r = ddptest::run({kExe, "--diff", a, b, "--json"}, b + ".diff.log", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = ddptest::printed_json(r.output);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  bool lr_listed = false;
  for (const auto& d : j["config"]["differences"]) lr_listed |= d["key"] == "config.lr";
  EXPECT_TRUE(lr_listed) << j["config"].dump();
}
}  // namespace
