#pragma once
// Which samples a rank trains on in an epoch, as torch.utils.data.DistributedSampler + DataLoader hand them out. One
// definition for the training loop and for the checks that recompute what every rank should have read.
#include <cstdint>
#include <vector>

#include "runtime/common/job_config.h"
#include "runtime/data/sampler.h"

namespace ddp {

// The batches `rank` runs in `epoch` (DistributedSampler.set_epoch(epoch), the rank's shard, batch_size with the
// job's drop_last), cut to whole accumulation windows: a trailing partial window is not run.
std::vector<std::vector<int64_t>> epoch_batches(int64_t samples, const JobConfig& job, int epoch, int rank, int world);
}  // namespace ddp
