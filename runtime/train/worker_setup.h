#pragma once
// What a rank trains with, decided once before its loop: the launcher's environment, the job, the run folder, the
// device and its plan, AMP; and the pieces built from them (the replicated model, the loss scaler's and the
// loader's options, the versions the manifest records).
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/job_config.h"
#include "runtime/data/loader.h"
#include "runtime/launch/environment/launch_env.h"
#include "runtime/train/amp.h"
#include "runtime/train/cuda_path.h"
#include "runtime/train/device_plan.h"
#include "runtime/train/dist.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/train/model.h"

namespace ddp {

struct RunSetup {
  LaunchEnv env;
  JobConfig job;
  std::string dir;
  at::Device device = at::kCPU;
  std::string backend;
  DevicePlan plan;
  cuda::DeviceInfo gpu;
  AmpChoice amp;
};

// The manifest's versions: ours, LibTorch's, the compiler's, and CUDA's with the device's (runtime/train/cuda_path.h).
records::manifest_versions versions_record(const cuda::DeviceInfo& gpu);
// The same seed everywhere, then rank 0's weights and buffers broadcast (as DDP does at construction).
Model replicated_model(const RunSetup& s, Dist& dist, const std::vector<int64_t>& sample_shape);
LossScalerOptions scaler_options(const AmpChoice& amp);
LoaderOptions loader_options(const JobConfig& job, int rank);

}  // namespace ddp
