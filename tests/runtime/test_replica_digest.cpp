// The replica digest (runtime/common/replica_digest.h) on pinned values the Python companion's torch-op version
// computes too (tests/python/companion/test_unit.py holds the same numbers): the two sides must agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/common/replica_digest.h"

namespace {

template <class T>
std::string digest(const std::vector<std::vector<T>>& tensors) {
  ddp::ReplicaDigest d;
  for (const auto& t : tensors) d.add(t.data(), t.size() * sizeof(T));
  return d.hex();
}

TEST(ReplicaDigest, MatchesThePythonCompanionsValues) {
  EXPECT_EQ(digest<int64_t>({{1, 2, 3}}), "b009e8c7bbc3068b");
  EXPECT_EQ(digest<float>({{0, 1, 2, 3, 4}}), "9df07692ce89948d");  // a word and a half: the tail zero-padded
  std::vector<int32_t> two_blocks(10000);                           // 40,000 bytes: a full block and a part
  for (int i = 0; i < 10000; ++i) two_blocks[i] = i;
  EXPECT_EQ(digest<int32_t>({two_blocks}), "4f3c493149020022");
  std::vector<double> halves;
  for (int i = -500; i <= 500; ++i) halves.push_back(i / 500.0);
  EXPECT_EQ(digest<double>({halves}), "913238bfa983490d");
  std::vector<double> sevenths;  // 800,000 bytes: 24 blocks and a part, each block's weight (2k+1) in play
  for (int i = 0; i < 100000; ++i) sevenths.push_back(i / 7.0);
  EXPECT_EQ(digest<double>({sevenths}), "368421314001bcae");
  ddp::ReplicaDigest two;  // tensors in sequence
  const int64_t a[] = {1, 2, 3};
  const float b[] = {0, 1, 2, 3, 4};
  two.add(a, sizeof a);
  two.add(b, sizeof b);
  EXPECT_EQ(two.hex(), "8cb5d5cadd385bf2");
  EXPECT_EQ(digest<float>({{}}), "01d391924635a6d1");
}

TEST(ReplicaDigest, AnyChangedWordAndAMovedWordChangeIt) {
  std::vector<uint64_t> v(9000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i * 2654435761u;
  const std::string base = digest<uint64_t>({v});
  for (size_t i : {size_t{0}, size_t{17}, size_t{4095}, size_t{4096}, size_t{8999}}) {
    auto w = v;
    w[i] ^= 1ull << 63;  // the top bit alone
    EXPECT_NE(digest<uint64_t>({w}), base) << i;
  }
  auto swapped = v;
  std::swap(swapped[3], swapped[3 + 16]);  // the same lane, the next row
  EXPECT_NE(digest<uint64_t>({swapped}), base);
  // A NaN is its bits: the same NaN twice is equal, unlike NaN != NaN.
  const std::vector<double> nan = {std::nan(""), 1.0};
  EXPECT_EQ(digest<double>({nan}), digest<double>({nan}));
}

}  // namespace
