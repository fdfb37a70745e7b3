// --analyze on real recorded runs: each slow-down knob on each rank must come out as the top cause, on the right
// rank; a balanced run must not blame any rank's pipeline stage.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "integration_support.h"
#include "traces/replay/replay_thresholds.h"

namespace {
namespace fs = std::filesystem;
using ddptest::fresh_dir;
using ddptest::kExe;

nlohmann::json record_and_analyze(const std::string& name, std::vector<std::string> options) {
  std::string d = fresh_dir(name);
  std::vector<std::string> args = {kExe, "--record", "--out", d, "--max-steps", "40"};
  args.insert(args.end(), options.begin(), options.end());
  auto r = ddptest::run(args, d + ".log", 300);
  EXPECT_EQ(r.code, 0) << r.output;
  auto a = ddptest::run({kExe, "--analyze", d, "--json"}, d + ".analyze.log", 120);
  EXPECT_EQ(a.code, 0) << a.output;
  auto j = ddptest::printed_json(a.output);
  EXPECT_FALSE(j.is_discarded()) << a.output;
  return j;
}

struct Knob {
  const char* stage;
  int rank;
  const char* ms;
};

class AnalyzeKnob : public ::testing::TestWithParam<Knob> {};

TEST_P(AnalyzeKnob, TopCauseIsTheSlowedStageOnTheSlowedRank) {
  const Knob& k = GetParam();
  std::string spec = "rank=" + std::to_string(k.rank) + ",stage=" + k.stage + ",ms=" + k.ms;
  auto j = record_and_analyze(std::string(k.stage) + std::to_string(k.rank), {"--slow", spec});
  ASSERT_TRUE(j.contains("causes") && !j["causes"].empty()) << j.dump(2);
  const auto& top = j["causes"][0];
  EXPECT_EQ(top["stage"], k.stage) << j["causes"].dump(2);
  EXPECT_EQ(top["rank"], k.rank) << j["causes"].dump(2);
  EXPECT_GT(top["share"].get<double>(), 0.1) << "a planted slowdown is a dominant stall";
  // Without the slowed stage the replay predicts a shorter step (how much shorter: docs/stalls.md, "What if").
  ASSERT_TRUE(top["what_if_step_ms"].is_number()) << top.dump();
  EXPECT_LT(top["what_if_step_ms"].get<double>(), 0.8 * j["step_ms"].get<double>()) << top.dump();
  double prev = 1e300;
  for (const auto& c : j["causes"]) {
    EXPECT_LE(c["lost_ms"].get<double>(), prev) << "causes are sorted by time lost";
    prev = c["lost_ms"].get<double>();
  }
}

// Margins are wide on purpose: on a shared 2-core machine a loopback Gloo allreduce sometimes stays exposed for ~8 ms
// of a step (descheduled peers), so each planted slowdown costs well over that: data stages far beyond what two
// prefetching workers hide (~25 ms/step waited), compute stages 20 ms.
INSTANTIATE_TEST_SUITE_P(EveryKnobEveryRank, AnalyzeKnob,
                         ::testing::Values(Knob{"disk_read", 0, "60"}, Knob{"disk_read", 1, "60"},
                                           Knob{"transform", 0, "60"}, Knob{"transform", 1, "60"}, Knob{"pin", 0, "60"},
                                           Knob{"pin", 1, "60"}, Knob{"h2d", 0, "20"}, Knob{"h2d", 1, "20"},
                                           Knob{"forward", 0, "20"}, Knob{"forward", 1, "20"},
                                           Knob{"backward", 0, "20"}, Knob{"backward", 1, "20"},
                                           Knob{"optimizer", 0, "20"}, Knob{"optimizer", 1, "20"}),
                         [](const ::testing::TestParamInfo<Knob>& i) {
                           return std::string(i.param.stage) + "_rank" + std::to_string(i.param.rank);
                         });

TEST(Analyze, BalancedRunBlamesNoRanksPipelineStage) {
  // More steps than the knob runs: a preempted step on a shared machine is real skew, but it must not dominate.
  auto j = record_and_analyze("balanced", {"--max-steps", "150"});
  ASSERT_TRUE(j.contains("ranks"));
  EXPECT_EQ(j["ranks"].size(), 2u);
  for (const auto& c : j["causes"]) {
    if (c["rank"].get<int>() < 0) continue;  // the collective itself (loopback Gloo on 2 shared cores is not free)
    // A rank's untracked time is where a descheduled rank's time lands: on a loaded machine one rank's can be a
    // tenth of what the ranks lose (13 % seen under a CPU hog). It is not a pipeline stage.
    if (c["stage"] == "other") continue;
    EXPECT_LT(c["share"].get<double>(), 0.1) << "no rank's stage dominates a balanced run: " << c.dump();
  }
  for (const auto& f : j["flags"]) EXPECT_NE(f["id"], "loader_cannot_keep_up") << f.dump();
  // The replay of the run's graph gives its steps back (docs/stalls.md, "The replay"): a check of the graph. Whether
  // it is trusted is the held-out validation's, and a balanced run on shared cores may have halves apart (Gloo's slow
  // collectives come in bursts: tests/data/golden/ours_balanced's 17.7 %), so the rule is held here, not a verdict.
  nlohmann::json& replay = j["replay"];
  ASSERT_TRUE(replay["step_error_mean"].is_number()) << replay.dump();
  EXPECT_LE(replay["step_error_mean"].get<double>(), 0.05) << replay.dump();
  ASSERT_TRUE(replay["holdout_mean_step_error"].is_number()) << replay.dump();
  EXPECT_EQ(replay["holdout_steps"].get<int>(), j["steps"].get<int>()) << replay.dump();
  EXPECT_EQ(replay["trusted"].get<bool>(), replay["holdout_mean_step_error"].get<double>() <= ddp::kReplayTrustedError)
      << replay.dump();
}

bool has_flag(const nlohmann::json& j, const std::string& id) {
  for (const auto& f : j["flags"])
    if (f["id"] == id) return true;
  return false;
}

TEST(Analyze, FlagsAccumulationWithoutNoSyncAndTinyBuckets) {
  auto sync = record_and_analyze("sync_every", {"--accum-steps", "4", "--sync-every-step"});
  EXPECT_TRUE(has_flag(sync, "sync_every_micro_step")) << sync["flags"].dump(2);
  auto nosync = record_and_analyze("nosync", {"--accum-steps", "4"});
  EXPECT_FALSE(has_flag(nosync, "sync_every_micro_step")) << nosync["flags"].dump(2);
  auto tiny = record_and_analyze("tiny", {"--bucket-mb", "0.001"});
  EXPECT_TRUE(has_flag(tiny, "tiny_buckets")) << tiny["flags"].dump(2);
  auto slow_loader = record_and_analyze("slow_loader", {"--slow", "rank=0,stage=transform,ms=12", "--workers", "1"});
  EXPECT_TRUE(has_flag(slow_loader, "loader_cannot_keep_up")) << slow_loader["flags"].dump(2);
}
}  // namespace
