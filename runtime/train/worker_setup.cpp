#include "runtime/train/worker_setup.h"

#include <torch/torch.h>

#include "ddp_profile_version.h"
#include "runtime/common/host_info.h"

namespace ddp {

records::manifest_versions versions_record(const cuda::DeviceInfo& gpu) {
  records::manifest_versions v;
  v.ddp_profile = kVersion;
  v.libtorch = TORCH_VERSION;
  v.compiler = compiler_version();
  v.cuda_build = cuda::built_with_cuda();
  v.cuda = records::to_json(cuda::versions(gpu));
  return v;
}

Model replicated_model(const RunSetup& s, Dist& dist, const std::vector<int64_t>& sample_shape) {
  torch::manual_seed(s.job.seed);
  Model model(s.job, sample_shape);
  model.to(s.device);
  torch::NoGradGuard ng;
  for (auto& p : model.parameters()) dist.broadcast(p, 0);
  for (auto& b : model.buffers()) dist.broadcast(b, 0);
  return model;
}

LossScalerOptions scaler_options(const AmpChoice& amp) {
  LossScalerOptions o;
  o.enabled = amp.scaler;
  return o;
}

LoaderOptions loader_options(const JobConfig& job, int rank) {
  LoaderOptions lo;
  lo.workers = job.workers;
  lo.prefetch = job.prefetch;
  lo.batch_size = job.batch_size;
  lo.accum_steps = job.accum_steps;
  lo.slow_disk_read_ms = job.slow_ms(rank, Stage::disk_read);
  lo.slow_transform_ms = job.slow_ms(rank, Stage::transform);
  lo.slow_pin_ms = job.slow_ms(rank, Stage::pin);
  return lo;
}

}  // namespace ddp
