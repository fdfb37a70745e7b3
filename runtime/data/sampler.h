#pragma once
// DistributedSampler's rule, exactly: the epoch's order is torch.randperm(n) from a CPU generator seeded with seed +
// epoch; pad it by repeating its head up to a multiple of the world size, or truncate it when drop_last, then rank r
// takes order[r::world]. No LibTorch: the permutation is ATen's CPU randperm, value for value.
#include <cstdint>
#include <vector>

namespace ddp {

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU, value for value: ATen's CPU generator
// is the standard MT19937 seeded with the seed's low 32 bits, and its randperm swaps place i with place i + random()
// % (n - i) for n below 2^32 / 20 (above, the inside-out shuffle with 64-bit draws). tests/runtime/test_sampler.cpp
// holds it equal to LibTorch's.
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

// The epoch's order of all n indices, as torch.utils.data.DistributedSampler draws it: torch_randperm(n) seeded with
// seed + epoch (identity when not shuffling).
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int epoch, bool shuffle);

// Samples per rank for a dataset of `n` samples (DistributedSampler.num_samples).
int64_t samples_per_rank(int64_t n, int world, bool drop_last);

// The indices rank `rank` consumes in one epoch, given the epoch's order of all n indices.
std::vector<int64_t> shard_indices(const std::vector<int64_t>& order, int rank, int world, bool drop_last);

// Batches a rank's indices: full batches, plus the short tail unless drop_last.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last);

}  // namespace ddp
