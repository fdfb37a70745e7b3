// Each rank of a local launch gets its own equal share of the cores; one rank, or fewer cores than ranks: no pinning.
#include <gtest/gtest.h>

#include "runtime/launch/environment/cpu_sets.h"

using namespace ddp;

TEST(CpuSets, EqualContiguousSharesAndNoPinningWhenTheyCannotBeGiven) {
  using Sets = std::vector<std::vector<int>>;
  EXPECT_EQ(rank_cpu_sets({0, 1}, 2), (Sets{{0}, {1}}));
  EXPECT_EQ(rank_cpu_sets({0, 1, 2, 3, 4}, 2), (Sets{{0, 1}, {2, 3}}));
  EXPECT_EQ(rank_cpu_sets({2, 5, 7, 9}, 4), (Sets{{2}, {5}, {7}, {9}})) << "the CPUs we may use, not 0..n";
  EXPECT_TRUE(rank_cpu_sets({0, 1}, 1).empty()) << "one rank keeps every core";
  EXPECT_TRUE(rank_cpu_sets({0, 1}, 3).empty()) << "more ranks than cores: nothing is pinned";
  EXPECT_TRUE(rank_cpu_sets({}, 2).empty());
}

TEST(CpuSets, PinningThisProcessIsWhatItThenMayUse) {
  const std::vector<int> all = allowed_cpus();
  ASSERT_FALSE(all.empty());
  ASSERT_TRUE(pin_process({all.front()}));
  EXPECT_EQ(allowed_cpus(), std::vector<int>{all.front()});
  ASSERT_TRUE(pin_process(all));
  EXPECT_EQ(allowed_cpus(), all);
  EXPECT_FALSE(pin_process({}));
}
