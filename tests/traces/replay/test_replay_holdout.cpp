// The replay's held-out validation (traces/replay/replay_holdout.h) on simulated runs: a steady run is predicted from
// half of its steps and trusted; a run whose halves differ is not, though its graph gives its own steps back; a run
// too short to hold half out says so; the reports carry the held-out error.
#include "tests/traces/analysis/analysis_sim.h"
#include "traces/replay/replay_trust.h"
#include "traces/replay/what_if.h"

using namespace analysis_test;

namespace {

// A run of 30 steps whose second half runs with `after` on every rank.
Sim changing_at_half(const RankKnobs& after) {
  Sim sim;
  sim.steps = 30;
  sim.change_at = 15;
  sim.rank_after = {after, after};
  return sim;
}

}  // namespace

TEST(ReplayHoldout, ASteadyRunIsPredictedFromHalfOfItsStepsAndTrusted) {
  for (int accum : {1, 2}) {
    Sim sim;
    sim.steps = 30;
    sim.accum = accum;
    const ddp::Analysis a = run_analysis(sim, "holdout_steady_" + std::to_string(accum));
    ASSERT_TRUE(a.replay.ok) << a.replay.error;
    ASSERT_TRUE(a.replay.holdout_ok) << a.replay.untrusted_reason;
    EXPECT_EQ(a.replay.holdout_steps, a.steps) << "every analysed step is predicted once";
    EXPECT_LE(a.replay.holdout_mean_step_error, ddp::kReplayTrustedError) << describe(a);
    EXPECT_LE(a.replay.holdout_error_mean, ddp::kReplayTrustedError) << "steady: each step as its fit says";
    EXPECT_TRUE(a.replay.trusted) << a.replay.untrusted_reason;
  }
}

TEST(ReplayHoldout, AStageThatDoublesMidRunIsNotTrustedThoughTheFitGivesTheStepsBack) {
  RankKnobs doubled;
  doubled.forward *= 2, doubled.backward *= 2;
  const ddp::Analysis a = run_analysis(changing_at_half(doubled), "holdout_doubled");
  ASSERT_TRUE(a.replay.ok) << a.replay.error;
  EXPECT_LE(a.replay.step_error_mean, 0.05) << "the graph gives its own steps back: no ground for trust\n"
                                            << describe(a);
  EXPECT_GT(a.replay.holdout_mean_step_error, 2 * ddp::kReplayTrustedError) << describe(a);
  EXPECT_FALSE(a.replay.trusted) << describe(a);
  EXPECT_NE(a.replay.untrusted_reason.find("misses the other half's mean step by"), std::string::npos)
      << a.replay.untrusted_reason;
}

TEST(ReplayHoldout, BurstsTheFittingHalfNeverSawAreNotTrusted) {
  RankKnobs bursty;
  bursty.late_ms = 40, bursty.late_every = 3;  // on both ranks: every third step of the second half 40 ms longer
  const ddp::Analysis a = run_analysis(changing_at_half(bursty), "holdout_bursts");
  ASSERT_TRUE(a.replay.ok) << a.replay.error;
  EXPECT_LE(a.replay.step_error_mean, 0.05) << describe(a);
  EXPECT_GT(a.replay.holdout_mean_step_error, 2 * ddp::kReplayTrustedError) << describe(a);
  EXPECT_FALSE(a.replay.trusted) << describe(a);
}

TEST(ReplayHoldout, ARunTooShortToHoldHalfOutIsNotTrustedAndSaysSo) {
  Sim sim;
  sim.steps = static_cast<int>(ddp::kReplayHoldoutMinSteps);  // the first is warm-up: one step too few analysed
  const ddp::Analysis a = run_analysis(sim, "holdout_short");
  ASSERT_TRUE(a.replay.ok) << a.replay.error;
  EXPECT_FALSE(a.replay.holdout_ok);
  EXPECT_FALSE(a.replay.trusted);
  EXPECT_NE(a.replay.untrusted_reason.find("too few"), std::string::npos) << a.replay.untrusted_reason;
  const nlohmann::json j = ddp::analysis_json(a);
  EXPECT_TRUE(j["replay"]["holdout_error_mean"].is_null()) << j["replay"].dump();
  EXPECT_EQ(j["replay"]["holdout_steps"], 0) << j["replay"].dump();
  EXPECT_NE(describe(a).find("untrusted: " + a.replay.untrusted_reason), std::string::npos) << describe(a);
}

TEST(ReplayHoldout, AnalyzeAndWhatIfPrintTheHeldOutErrorBesideTheFit) {
  Sim sim;
  sim.steps = 30;
  ddp::RunTrace run;
  const ddp::Analysis a = run_analysis(sim, "holdout_reports", &run);
  const nlohmann::json j = ddp::analysis_json(a);
  for (const char* key :
       {"holdout_error_mean", "holdout_error_p90", "holdout_mean_step_error", "step_error_mean", "step_error_p90"})
    EXPECT_TRUE(j["replay"][key].is_number()) << key << ": " << j["replay"].dump();
  EXPECT_EQ(j["replay"]["holdout_steps"], a.steps);
  EXPECT_NE(describe(a).find("replay: predicts steps it did not fit within "), std::string::npos) << describe(a);

  std::vector<ddp::WhatIfEdit> edits;
  std::string err;
  ASSERT_TRUE(ddp::parse_what_if("workers=4", edits, err)) << err;
  ddp::WhatIf w;
  ASSERT_TRUE(ddp::what_if(run, edits, w, err)) << err;
  const nlohmann::json wj = ddp::what_if_json(w);
  EXPECT_DOUBLE_EQ(wj["replay"]["holdout_error_mean"].get<double>(), a.replay.holdout_error_mean) << wj.dump();
  EXPECT_DOUBLE_EQ(wj["replay"]["holdout_error_p90"].get<double>(), a.replay.holdout_error_p90) << wj.dump();
  EXPECT_DOUBLE_EQ(wj["replay"]["holdout_mean_step_error"].get<double>(), a.replay.holdout_mean_step_error);
  EXPECT_EQ(wj["replay"]["holdout_steps"], a.steps);
  EXPECT_EQ(wj["replay"]["trusted"].get<bool>(), a.replay.trusted);
  EXPECT_NE(ddp::what_if_text(w).find("predicts steps it did not fit within "), std::string::npos)
      << ddp::what_if_text(w);
}
