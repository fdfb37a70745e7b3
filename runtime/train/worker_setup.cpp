#include "runtime/train/worker_setup.h"

#include <torch/torch.h>

#include "runtime/common/host_info.h"

namespace ddp {

nlohmann::json versions_json() {
  nlohmann::json v = {{"ddp_profile", "0.1.0"}, {"libtorch", TORCH_VERSION}, {"compiler", compiler_version()}};
#if DDP_PROFILE_CUDA
  v["cuda_build"] = true;
#else
  v["cuda_build"] = false;
  v["cuda"] = nullptr;
  v["nccl"] = nullptr;
  v["cudnn"] = nullptr;
#endif
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
