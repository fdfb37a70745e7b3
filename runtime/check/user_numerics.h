#pragma once
// numerics.reference's evidence for the user's script: the ranks' tensor dumps against the single-process reference
// the companion computed on the union batch with the pre-step weights (LibTorch, to read the .pt files).
#include <cstdint>
#include <string>

#include "runtime/check/evidence.h"

namespace ddp {

// What torch.utils.data.DistributedSampler(n, world, rank, shuffle, seed, drop_last) yields after set_epoch(epoch).
std::vector<int64_t> distributed_sampler_indices(int64_t n, int world, int rank, bool shuffle, uint64_t seed, int epoch,
                                                 bool drop_last);

NumericsOutcome user_numerics_evidence(const std::string& run_dir, int world, bool shard_ok,
                                       const records::companion_meta& meta0, int64_t verify_steps);

}  // namespace ddp
