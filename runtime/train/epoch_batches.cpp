#include "runtime/train/epoch_batches.h"

#include <ATen/ATen.h>

#include "runtime/data/sampler.h"
#include "runtime/train/torch_compat.h"

namespace ddp {
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int epoch, bool shuffle) {
  std::vector<int64_t> order(n);
  if (!shuffle) {
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    return order;
  }
  at::Generator g = compat::cpu_generator(seed + static_cast<uint64_t>(epoch));
  at::Tensor p = at::randperm(n, g, at::TensorOptions().dtype(at::kLong));
  const int64_t* d = p.data_ptr<int64_t>();
  order.assign(d, d + n);
  return order;
}

std::vector<std::vector<int64_t>> epoch_batches(int64_t samples, const JobConfig& job, int epoch, int rank, int world) {
  std::vector<int64_t> order = epoch_order(samples, job.seed, epoch, job.shuffle);
  auto batches = make_batches(shard_indices(order, rank, world, job.drop_last), job.batch_size, job.drop_last);
  batches.resize(batches.size() / static_cast<size_t>(job.accum_steps) * static_cast<size_t>(job.accum_steps));
  return batches;
}
}  // namespace ddp
