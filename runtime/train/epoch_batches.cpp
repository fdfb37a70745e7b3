#include "runtime/train/epoch_batches.h"

#include "runtime/data/sampler.h"

namespace ddp {
std::vector<std::vector<int64_t>> epoch_batches(int64_t samples, const JobConfig& job, int epoch, int rank, int world) {
  std::vector<int64_t> order = epoch_order(samples, job.seed, epoch, job.shuffle);
  auto batches = make_batches(shard_indices(order, rank, world, job.drop_last), job.batch_size, job.drop_last);
  batches.resize(batches.size() / static_cast<size_t>(job.accum_steps) * static_cast<size_t>(job.accum_steps));
  return batches;
}
}  // namespace ddp
