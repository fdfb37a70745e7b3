#include "runtime/model.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <stdexcept>

namespace ddp {
torch::nn::Sequential make_model(const JobConfig& job, int64_t features) {
  torch::nn::Sequential m;
  m->push_back("fc1", torch::nn::Linear(features, job.hidden));
  if (job.model == "mlp-bn") m->push_back("bn1", torch::nn::BatchNorm1d(job.hidden));
  else if (job.model != "mlp") throw std::invalid_argument("unknown model '" + job.model + "'");
  m->push_back("relu", torch::nn::ReLU());
  m->push_back("fc2", torch::nn::Linear(job.hidden, job.classes));
  return m;
}

at::Tensor forward_collect(torch::nn::Sequential& model, at::Tensor x,
                           std::vector<std::pair<std::string, at::Tensor>>* acts) {
  if (!acts) return model->forward(x);
  auto names = model->named_children();
  size_t i = 0;
  for (auto& layer : *model) {
    x = layer.forward(x);
    acts->emplace_back(names[i++].key(), x.detach().clone());
  }
  return x;
}
}  // namespace ddp
