// The replay's one trust rule (traces/replay/replay_trust.h), and what --what-if says of a fit it does not trust.
#include <gtest/gtest.h>

#include "traces/replay/replay_trust.h"
#include "traces/replay/what_if.h"

namespace {

ddp::ReplayResult fit(double error_mean) {
  ddp::ReplayResult r;
  r.ok = true;
  r.error_mean = error_mean;
  r.step_ms = r.fit_ms = r.measured_ms = 10;
  return r;
}

const char* kNote = "1 wait(s) for a collective some rank never reached were replayed as measured";

}  // namespace

TEST(ReplayTrust, AFitWithinTheBarAndNothingPassedAsMeasuredIsTrusted) {
  EXPECT_TRUE(ddp::trusted(fit(0.01)));
  EXPECT_TRUE(ddp::trusted(fit(ddp::kReplayTrustedError)));
  EXPECT_EQ(ddp::distrust_reason(fit(0.01)), "");
}

TEST(ReplayTrust, AMissANoteOrNoReplayIsNotTrustedAndSaysWhy) {
  const ddp::ReplayResult miss = fit(0.073);
  EXPECT_FALSE(ddp::trusted(miss));
  EXPECT_NE(ddp::distrust_reason(miss).find("misses the measured steps by 7.3% on average (more than 5%)"),
            std::string::npos)
      << ddp::distrust_reason(miss);
  ddp::ReplayResult noted = fit(0.0);
  noted.notes.push_back(kNote);
  EXPECT_FALSE(ddp::trusted(noted)) << "a wait passed as measured gives its steps back by fiat";
  EXPECT_EQ(ddp::distrust_reason(noted), kNote);
  ddp::ReplayResult failed;
  failed.error = "no steps in common to replay";
  EXPECT_FALSE(ddp::trusted(failed));
  EXPECT_EQ(ddp::distrust_reason(failed), failed.error);
}

TEST(ReplayTrust, WhatIfSaysItsFitsNoteAsItsReasonAndMarksThePredictionUntrusted) {
  ddp::WhatIf w;
  w.result = fit(0.0);
  w.result.notes.push_back(kNote);
  w.trusted = ddp::trusted(w.result);
  const nlohmann::json j = ddp::what_if_json(w);
  EXPECT_EQ(j["reason"], kNote);
  EXPECT_FALSE(j["replay"]["trusted"].get<bool>());
  EXPECT_NE(ddp::what_if_text(w).find(std::string("UNTRUSTED: ") + kNote), std::string::npos) << ddp::what_if_text(w);
}
