// DistributedSampler semantics, checked against a direct transcription of torch/utils/data/distributed.py's
// arithmetic (written independently of runtime/data/sampler.cpp), plus the properties the sharding check relies on.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "runtime/data/sampler.h"
#include "runtime/train/epoch_batches.h"
#include "runtime/train/torch_compat.h"

namespace {
using ddp::shard_indices;

// The Python, line by line: num_samples, total_size, padding by list repetition, then indices[rank:total:world].
std::vector<int64_t> python_reference(std::vector<int64_t> indices, int rank, int world, bool drop_last) {
  const int64_t len = static_cast<int64_t>(indices.size());
  int64_t num_samples;
  if (drop_last && len % world != 0)
    num_samples = static_cast<int64_t>(std::ceil((static_cast<double>(len) - world) / world));
  else
    num_samples = static_cast<int64_t>(std::ceil(static_cast<double>(len) / world));
  const int64_t total = num_samples * world;
  if (!drop_last) {
    int64_t padding = total - len;
    if (padding <= len) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + padding);
    } else {
      std::vector<int64_t> rep;
      int64_t times = static_cast<int64_t>(std::ceil(static_cast<double>(padding) / len));
      for (int64_t t = 0; t < times; ++t) rep.insert(rep.end(), indices.begin(), indices.end());
      indices.insert(indices.end(), rep.begin(), rep.begin() + padding);
    }
  } else {
    indices.resize(total);
  }
  std::vector<int64_t> out;
  for (int64_t i = rank; i < total; i += world) out.push_back(indices[i]);
  return out;
}

std::vector<int64_t> shuffled(int64_t n, uint64_t salt) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  uint64_t s = salt * 2654435761u + 7;
  for (int64_t i = n - 1; i > 0; --i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i], v[(s >> 33) % (i + 1)]);
  }
  return v;
}

TEST(Sampler, MatchesPythonFormulaForManySizes) {
  for (int world : {1, 2, 3, 4, 7})
    for (int64_t n : {1, 2, 3, 5, 10, 11, 64, 99, 100, 101, 10000})
      for (bool drop_last : {false, true})
        for (int rank = 0; rank < world; ++rank) {
          auto order = shuffled(n, static_cast<uint64_t>(n * 31 + world));
          if (drop_last && n < world) continue;  // PyTorch yields nothing here; we agree on num_samples = 0
          EXPECT_EQ(shard_indices(order, rank, world, drop_last), python_reference(order, rank, world, drop_last))
              << "n=" << n << " world=" << world << " rank=" << rank << " drop_last=" << drop_last;
        }
}

TEST(Sampler, DivisibleSizeIsAPartition) {
  auto order = shuffled(10000, 3);
  std::set<int64_t> seen;
  for (int r = 0; r < 2; ++r) {
    auto mine = shard_indices(order, r, 2, true);
    EXPECT_EQ(mine.size(), 5000u);
    for (auto i : mine) EXPECT_TRUE(seen.insert(i).second) << "index " << i << " on two ranks";
  }
  EXPECT_EQ(seen.size(), 10000u);
}

TEST(Sampler, PaddingRepeatsTheHeadWhenNotDivisible) {
  auto order = shuffled(101, 5);
  std::map<int64_t, int> count;
  for (int r = 0; r < 2; ++r)
    for (auto i : shard_indices(order, r, 2, false)) count[i]++;
  EXPECT_EQ(count.size(), 101u);  // the union covers everything
  int dup = 0;
  for (auto& [i, c] : count)
    if (c > 1) {
      ++dup;
      EXPECT_EQ(i, order[0]) << "padding must repeat the head of the order";
    }
  EXPECT_EQ(dup, 1);
}

TEST(Sampler, DropLastTruncatesTheTail) {
  auto order = shuffled(101, 9);
  std::set<int64_t> all;
  for (int r = 0; r < 2; ++r) {
    auto mine = shard_indices(order, r, 2, true);
    EXPECT_EQ(mine.size(), 50u);
    all.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(all.size(), 100u);
  EXPECT_EQ(all.count(order[100]), 0u) << "the last index of the order is the one dropped";
}

TEST(Sampler, EpochsReshuffleAndAreReproducible) {
  auto e0 = ddp::epoch_order(1000, 42, 0, true);
  auto e1 = ddp::epoch_order(1000, 42, 1, true);
  EXPECT_NE(e0, e1) << "set_epoch must change the order";
  EXPECT_EQ(e0, ddp::epoch_order(1000, 42, 0, true)) << "same seed and epoch, same order";
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  // seed + epoch: (seed 41, epoch 1) draws the same permutation as (seed 42, epoch 0), as in PyTorch.
  EXPECT_EQ(ddp::epoch_order(1000, 41, 1, true), e0);
  auto plain = ddp::epoch_order(5, 42, 3, false);
  EXPECT_EQ(plain, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// Our randperm against LibTorch's, the one DistributedSampler draws: the same permutation for every length and seed
// (seeds past 2^32 too: the generator keeps their low 32 bits).
TEST(Sampler, OurRandpermIsLibTorchsValueForValue) {
  for (int64_t n : {0, 1, 2, 3, 10, 97, 1000, 60000})
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, uint64_t{4294967296} + 5, uint64_t{1} << 63}) {
      at::Tensor p = at::randperm(n, ddp::compat::cpu_generator(seed), at::TensorOptions().dtype(at::kLong));
      const int64_t* d = p.data_ptr<int64_t>();
      ASSERT_EQ(ddp::torch_randperm(n, seed), std::vector<int64_t>(d, d + n)) << "n " << n << ", seed " << seed;
    }
}

TEST(Sampler, BatchesDropTheShortTail) {
  std::vector<int64_t> idx(130);
  for (int i = 0; i < 130; ++i) idx[i] = i;
  EXPECT_EQ(ddp::make_batches(idx, 64, true).size(), 2u);
  auto keep = ddp::make_batches(idx, 64, false);
  ASSERT_EQ(keep.size(), 3u);
  EXPECT_EQ(keep[2].size(), 2u);
}
}  // namespace
