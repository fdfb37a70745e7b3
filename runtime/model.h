#pragma once
#include <torch/nn/modules/container/sequential.h>

#include "runtime/job_config.h"

namespace ddp {
// The job's model: "mlp" = Linear(F, hidden) -> ReLU -> Linear(hidden, classes) (the seed's model);
// "mlp-bn" adds BatchNorm1d after the first layer (per-rank batch statistics: a classic DDP numerics trap).
torch::nn::Sequential make_model(const JobConfig& job, int64_t features);

// Runs the model layer by layer; with `acts`, keeps a copy of each layer's output under the layer's name.
at::Tensor forward_collect(torch::nn::Sequential& model, at::Tensor x,
                           std::vector<std::pair<std::string, at::Tensor>>* acts);
}  // namespace ddp
