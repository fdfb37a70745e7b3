// Memory growth after warm-up (traces/analysis/memory_growth.h): one rule, read with the analysis flag's marks and
// with the check's.
#include <gtest/gtest.h>

#include "traces/analysis/memory_growth.h"

namespace {

std::vector<double> series(size_t n, double base, double per_sample, double jump_at = -1, double jump = 0) {
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(base + per_sample * i + (jump_at >= 0 && i >= jump_at ? jump : 0));
  return v;
}

}  // namespace

TEST(MemoryGrowth, TheCountersMarksAskEveryThirdHigherAndMoreThan50MiBAnd10Percent) {
  const double mib = 1 << 20;
  const ddp::MemoryGrowth leak = ddp::memory_growth(series(18, 1000 * mib, 15 * mib), ddp::kCounterGrowth);
  EXPECT_TRUE(leak.grows);
  ASSERT_EQ(leak.part_medians.size(), 3u);
  EXPECT_DOUBLE_EQ(leak.rise, leak.part_medians[2] - leak.part_medians[0]);
  // One jump that then stays flat: the middle third is not below the last.
  EXPECT_FALSE(ddp::memory_growth(series(18, 1000 * mib, 0, 4, 400 * mib), ddp::kCounterGrowth).grows);
  // A creep under 50 MiB, and one over 50 MiB but under 10 % of a large process.
  EXPECT_FALSE(ddp::memory_growth(series(18, 1000 * mib, 1 * mib), ddp::kCounterGrowth).grows);
  EXPECT_FALSE(ddp::memory_growth(series(18, 100000 * mib, 8 * mib), ddp::kCounterGrowth).grows);
}

TEST(MemoryGrowth, TheChecksMarksAskARateAndARiseAndIgnoreAOneTimeJump) {
  // A kept graph: 24 KB a step on the heap; the creep of correct scripts: 4.3 KB.
  EXPECT_TRUE(ddp::memory_growth(series(81, 150e6, 24e3), ddp::kLeakHeld).grows);
  EXPECT_FALSE(ddp::memory_growth(series(81, 150e6, 4.3e3), ddp::kLeakHeld).grows);
  // The first checkpoint's save: +285 KB at once, then flat. Its rise is above the mark, its rate is not.
  const ddp::MemoryGrowth jump = ddp::memory_growth(series(81, 150e6, 0, 40, 285e3), ddp::kLeakHeld);
  EXPECT_GE(jump.rise, ddp::kLeakHeld.rise);
  EXPECT_FALSE(jump.grows);
  // The resident set's wider marks: what is a leak on the heap is not on the resident set.
  EXPECT_FALSE(ddp::memory_growth(series(81, 150e6, 24e3), ddp::kLeakResident).grows);
  EXPECT_TRUE(ddp::memory_growth(series(81, 150e6, 220e3), ddp::kLeakResident).grows);
  // The check reads a median of an even count as its upper middle, as its marks were measured with.
  EXPECT_EQ(ddp::memory_growth({1, 2, 3, 4}, ddp::kLeakHeld).median, 3.0);
  EXPECT_EQ(ddp::memory_growth({}, ddp::kLeakHeld).rise, 0.0);
}
