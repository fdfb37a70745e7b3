// The replay's one trust rule (traces/replay/replay_trust.h), and what --what-if says of a replay it does not trust.
#include <gtest/gtest.h>

#include "traces/replay/replay_trust.h"
#include "traces/replay/what_if.h"

namespace {

// A replay that ran, the mean step of the halves it did not fit predicted within `holdout_error` (each step within
// twice that), and its fit to the run within `fit_error_mean`.
ddp::ReplayResult replayed(double holdout_error, double fit_error_mean = 0) {
  ddp::ReplayResult r;
  r.ok = true;
  r.error_mean = fit_error_mean;
  r.holdout.ok = true;
  r.holdout.steps = 20;
  r.holdout.mean_step_error = holdout_error;
  r.holdout.error_mean = 2 * holdout_error;
  r.step_ms = r.fit_ms = r.measured_ms = 10;
  return r;
}

const char* kNote = "1 wait(s) for a collective some rank never reached were replayed as measured";

}  // namespace

TEST(ReplayTrust, HeldOutStepsPredictedWithinTheBarAndNothingPassedAsMeasuredIsTrusted) {
  EXPECT_TRUE(ddp::trusted(replayed(0.01)));
  EXPECT_TRUE(ddp::trusted(replayed(ddp::kReplayTrustedError)));
  EXPECT_EQ(ddp::distrust_reason(replayed(0.01)), "");
}

TEST(ReplayTrust, TheFitToTheRunItselfDecidesNothing) {
  EXPECT_FALSE(ddp::trusted(replayed(0.2, 0.0))) << "a replay giving its own input back says nothing of the model";
  EXPECT_TRUE(ddp::trusted(replayed(0.01, 0.2))) << "the fit checks the graph, the held-out steps the model";
}

TEST(ReplayTrust, AMissANoteTooFewStepsOrNoReplayIsNotTrustedAndSaysWhy) {
  const ddp::ReplayResult miss = replayed(0.273);
  EXPECT_FALSE(ddp::trusted(miss));
  EXPECT_NE(ddp::distrust_reason(miss).find("misses the other half's mean step by 27.3% (more than 10%)"),
            std::string::npos)
      << ddp::distrust_reason(miss);
  ddp::ReplayResult noted = replayed(0.0);
  noted.notes.push_back(kNote);
  EXPECT_FALSE(ddp::trusted(noted)) << "a wait passed as measured gives its steps back by fiat";
  EXPECT_EQ(ddp::distrust_reason(noted), kNote);
  ddp::ReplayResult short_run = replayed(0.0);
  short_run.holdout.ok = false;
  short_run.holdout.reason = "6 step(s) analysed: too few";
  EXPECT_FALSE(ddp::trusted(short_run));
  EXPECT_EQ(ddp::distrust_reason(short_run), short_run.holdout.reason);
  ddp::ReplayResult failed;
  failed.error = "no steps in common to replay";
  EXPECT_FALSE(ddp::trusted(failed));
  EXPECT_EQ(ddp::distrust_reason(failed), failed.error);
}

TEST(ReplayTrust, WhatIfSaysWhyAsItsReasonAndMarksThePredictionUntrusted) {
  ddp::WhatIf w;
  w.result = replayed(0.0);
  w.result.notes.push_back(kNote);
  w.trusted = ddp::trusted(w.result);
  nlohmann::json j = ddp::what_if_json(w);
  EXPECT_EQ(j["reason"], kNote);
  EXPECT_FALSE(j["replay"]["trusted"].get<bool>());
  EXPECT_NE(ddp::what_if_text(w).find(std::string("UNTRUSTED: ") + kNote), std::string::npos) << ddp::what_if_text(w);
  w.result = replayed(0.273);
  w.trusted = ddp::trusted(w.result);
  j = ddp::what_if_json(w);
  EXPECT_EQ(j["reason"], ddp::distrust_reason(w.result));
  EXPECT_DOUBLE_EQ(j["replay"]["holdout_mean_step_error"].get<double>(), 0.273);
  EXPECT_NE(ddp::what_if_text(w).find("UNTRUSTED: fitted on one half of the steps"), std::string::npos)
      << ddp::what_if_text(w);
}
