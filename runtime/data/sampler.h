#pragma once
// DistributedSampler's rule, exactly: pad the (shuffled) order by repeating its head up to a multiple of the world
// size, or truncate it when drop_last, then rank r takes order[r::world]. The permutation itself comes from
// LibTorch's randperm seeded with seed + epoch (see train/epoch_batches.h), as torch.utils.data.DistributedSampler
// does.
#include <cstdint>
#include <vector>

namespace ddp {

// Samples per rank for a dataset of `n` samples (DistributedSampler.num_samples).
int64_t samples_per_rank(int64_t n, int world, bool drop_last);

// The indices rank `rank` consumes in one epoch, given the epoch's order of all n indices.
std::vector<int64_t> shard_indices(const std::vector<int64_t>& order, int rank, int world, bool drop_last);

// Batches a rank's indices: full batches, plus the short tail unless drop_last.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last);

}  // namespace ddp
