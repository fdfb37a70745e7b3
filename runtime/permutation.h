#pragma once
#include <cstdint>
#include <vector>

namespace ddp {
// The epoch's order of all n indices, as torch.utils.data.DistributedSampler draws it: randperm(n) from a CPU
// generator seeded with seed + epoch (identity when not shuffling).
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int epoch, bool shuffle);
}  // namespace ddp
