// The shared helpers of traces/: fmt (text_format.h) and median/percentile (stats.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "traces/base/stats.h"
#include "traces/base/text_format.h"

namespace {

TEST(TextFormat, FormatsLikePrintf) {
  EXPECT_EQ(ddp::fmt("rank %d: %.2f ms (%s)", 3, 1.005, "x"), "rank 3: 1.00 ms (x)");
  EXPECT_EQ(ddp::fmt("%+10.3f", -2.5), "    -2.500");
  EXPECT_EQ(ddp::fmt("%s", ""), "");
}

TEST(TextFormat, LongTextIsNotTruncated) {
  const std::string long_text(5000, 'a');
  EXPECT_EQ(ddp::fmt("<%s>", long_text.c_str()), "<" + long_text + ">");
}

TEST(Stats, MedianIsTheMeanOfTheTwoMiddlesForAnEvenCount) {
  EXPECT_EQ(ddp::median({}), 0.0);
  EXPECT_EQ(ddp::median({7}), 7.0);
  EXPECT_EQ(ddp::median({3, 1, 2}), 2.0);
  EXPECT_EQ(ddp::median({4, 1, 3, 2}), 2.5);
}

TEST(Stats, PercentileIsTheNearestRank) {
  EXPECT_EQ(ddp::percentile({}, 0.5), 0.0);
  const std::vector<double> v = {40, 10, 30, 20};
  EXPECT_EQ(ddp::percentile(v, 0.5), 30.0);  // index round(0.5 * 3) = 2: the upper middle
  EXPECT_EQ(ddp::percentile(v, 0.0), 10.0);
  EXPECT_EQ(ddp::percentile(v, 1.0), 40.0);
  std::vector<double> ten;
  for (int i = 10; i >= 1; --i) ten.push_back(i);
  EXPECT_EQ(ddp::percentile(ten, 0.9), 9.0);  // index round(0.9 * 9) = 8
  EXPECT_EQ(ddp::percentile(v, 2.0), 40.0);   // clamped to [0, 1]
  EXPECT_EQ(ddp::percentile(v, -1.0), 10.0);
}

TEST(Stats, TheLowerMedianIsAValueOfTheSample) {
  EXPECT_EQ(ddp::lower_median({}), 0.0);
  EXPECT_EQ(ddp::lower_median({7}), 7.0);
  EXPECT_EQ(ddp::lower_median({3, 1, 2}), 2.0);
  EXPECT_EQ(ddp::lower_median({4, 1, 3, 2}), 2.0);
  EXPECT_EQ(ddp::lower_median({15, 5}), 5.0);  // of two ranks, the faster
}

TEST(Stats, TheCoveringPercentileKeepsAtLeastItsShareAtOrBelow) {
  EXPECT_EQ(ddp::covering_percentile({}, 0.9), 0.0);
  std::vector<double> nineteen;
  for (int i = 19; i >= 1; --i) nineteen.push_back(i);
  EXPECT_EQ(ddp::covering_percentile(nineteen, 0.9), 18.0);  // rank ceil(17.1) = 18
  EXPECT_EQ(ddp::percentile(nineteen, 0.9), 17.0);           // index round(16.2) = 16: under 90 % at or below
  std::vector<double> ten;
  for (int i = 10; i >= 1; --i) ten.push_back(i);
  EXPECT_EQ(ddp::covering_percentile(ten, 0.9), 9.0);
  EXPECT_EQ(ddp::covering_percentile(ten, 0.0), 1.0);
  EXPECT_EQ(ddp::covering_percentile(ten, 1.0), 10.0);
}

}  // namespace
