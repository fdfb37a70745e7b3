#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/train/loss_scaler.h"

namespace {
using namespace ddp;

TEST(LossScaler, StartsAtTwoToTheSixteen) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.inv_scale(), 1.0 / 65536.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, InfSkipsTheStepBacksOffAndRestartsTheStreak) {
  LossScaler s;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.update(false), ScalerDecision::step);
  EXPECT_EQ(s.growth_tracker(), 10);
  EXPECT_EQ(s.update(true), ScalerDecision::skip);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.update(true), ScalerDecision::skip);
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.steps_skipped(), 2u);
}

TEST(LossScaler, GrowsAfterTheIntervalOfGoodSteps) {
  LossScaler s;
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 1999);
  EXPECT_EQ(s.update(false), ScalerDecision::step);  // the 2000th good step
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  // An inf in the middle of the next window restarts the count.
  for (int i = 0; i < 1500; ++i) s.update(false);
  s.update(true);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0);
}

TEST(LossScaler, GrowthNeverOverflowsFloat32) {
  LossScalerOptions o;
  o.init_scale = std::numeric_limits<float>::max() / 1.5;
  o.growth_interval = 1;
  LossScaler s(o);
  const double before = s.scale();
  s.update(false);
  EXPECT_EQ(s.scale(), before);
  EXPECT_TRUE(std::isfinite(s.scale()));
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, SameReducedFlagGivesTheSameDecisionOnEveryRank) {
  // Rank 1 sees an inf locally at some steps; after the MAX allreduce both ranks update with the same flag.
  LossScaler r0, r1;
  for (int step = 0; step < 5000; ++step) {
    bool local0 = false, local1 = step % 777 == 3;
    bool any = local0 || local1;
    ASSERT_EQ(r0.update(any), r1.update(any));
    ASSERT_EQ(r0.scale(), r1.scale());
  }
  EXPECT_EQ(r0.state().growth_tracker, r1.state().growth_tracker);
  EXPECT_EQ(r0.steps_skipped(), 7u);
}

TEST(LossScaler, StateRoundTrip) {
  LossScaler a;
  for (int i = 0; i < 2345; ++i) a.update(i == 100);
  LossScalerState st = a.state();
  EXPECT_TRUE(st.enabled);
  LossScaler b;
  std::string err;
  ASSERT_TRUE(b.load(st, err)) << err;
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.growth_tracker(), a.growth_tracker());
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(a.update(i % 1000 == 999), b.update(i % 1000 == 999));
  EXPECT_EQ(a.scale(), b.scale());
}

TEST(LossScaler, RejectsUnusableState) {
  LossScaler s;
  std::string err;
  EXPECT_FALSE(s.load({0.0, 0, true}, err));
  EXPECT_FALSE(s.load({std::nan(""), 0, true}, err));
  EXPECT_FALSE(s.load({1e300, 0, true}, err));
  EXPECT_FALSE(s.load({0.1, 0, true}, err));  // not a float32 value
  EXPECT_FALSE(s.load({1024.0, -1, true}, err));
  EXPECT_NE(err.find("tracker"), std::string::npos);
  EXPECT_EQ(s.scale(), 65536.0);
}

TEST(LossScaler, DisabledIsTransparent) {
  LossScalerOptions o;
  o.enabled = false;
  LossScaler s(o);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.update(true), ScalerDecision::step);
  EXPECT_FALSE(s.state().enabled);
}

}  // namespace
