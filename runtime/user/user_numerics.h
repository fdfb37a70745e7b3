#pragma once
// The two judgements of the user's job that read tensors or draw a permutation (LibTorch): the sampler rule's
// expected shard, and numerics.reference from the companion's dumps (the ranks' tensors and the single-process
// reference it computed on the union batch with the pre-step weights).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/verify/checks.h"

namespace ddp {

// What torch.utils.data.DistributedSampler(n, world, rank, shuffle, seed, drop_last) yields after set_epoch(epoch).
std::vector<int64_t> distributed_sampler_indices(int64_t n, int world, int rank, bool shuffle, uint64_t seed, int epoch,
                                                 bool drop_last);

CheckResult user_numerics_reference(const std::string& run_dir, int world, bool shard_ok, const nlohmann::json& meta0,
                                    int64_t verify_steps);

}  // namespace ddp
