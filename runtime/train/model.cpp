#include "runtime/train/model.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <filesystem>
#include <stdexcept>

namespace ddp {

Model::Model(const JobConfig& job, const std::vector<int64_t>& sample_shape) {
  const bool images = sample_shape.size() == 3;
  if (job.model == "cnn" || (images && (job.model == "mlp" || job.model == "mlp-bn"))) {
    if (!images) throw std::invalid_argument("--model cnn needs image samples {C, H, W} (--dataset images)");
    namespace nn = torch::nn;
    seq_ = nn::Sequential();
    seq_->push_back("conv1", nn::Conv2d(nn::Conv2dOptions(sample_shape[0], 16, 3).padding(1)));
    seq_->push_back("relu1", nn::ReLU());
    seq_->push_back("pool1", nn::MaxPool2d(nn::MaxPool2dOptions(2)));
    seq_->push_back("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)));
    seq_->push_back("relu2", nn::ReLU());
    seq_->push_back("pool2", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    seq_->push_back("flatten", nn::Flatten());
    seq_->push_back("fc", nn::Linear(32, job.classes));
    description_ = "cnn 3x" + std::to_string(sample_shape[1]) + "x" + std::to_string(sample_shape[2]) + " -> " +
                   std::to_string(job.classes);
    return;
  }
  // A TorchScript model gets the samples as they are, whatever their shape (its forward is the user's).
  int64_t features = 1;
  for (int64_t d : sample_shape) features *= d;
  if (job.model == "mlp" || job.model == "mlp-bn") {
    seq_ = torch::nn::Sequential();
    // Samples of another shape ({H, W}, {C, L}, ...) are flattened, as nn.Flatten does before an MLP.
    if (sample_shape.size() > 1) seq_->push_back("flatten", torch::nn::Flatten());
    seq_->push_back("fc1", torch::nn::Linear(features, job.hidden));
    if (job.model == "mlp-bn") seq_->push_back("bn1", torch::nn::BatchNorm1d(job.hidden));
    seq_->push_back("relu", torch::nn::ReLU());
    seq_->push_back("fc2", torch::nn::Linear(job.hidden, job.classes));
    description_ = job.model + " " + std::to_string(features) + "-" + std::to_string(job.hidden) + "-" +
                   std::to_string(job.classes);
    return;
  }
  if (!std::filesystem::exists(job.model))
    throw std::invalid_argument("--model: '" + job.model + "' is neither mlp, mlp-bn nor an existing TorchScript file");
  try {
    script_ = torch::jit::load(job.model);
  } catch (const c10::Error& e) {
    throw std::invalid_argument("--model: cannot load TorchScript file " + job.model + ": " +
                                e.what_without_backtrace());
  }
  script_->train();
  const std::string type = script_->type()->name() ? script_->type()->name()->qualifiedName() : "";
  script_is_sequential_ = type.find("Sequential") != std::string::npos;
  // Every parameter trains, as in a scripted nn.Module; a module saved with frozen tensors gets them unfrozen.
  size_t n = 0;
  for (const auto& p : script_->named_parameters(true)) {
    if (!p.value.requires_grad()) p.value.requires_grad_(true);
    ++n;
  }
  if (n == 0) throw std::invalid_argument("--model: " + job.model + " has no parameters to train");
  description_ = "TorchScript " + job.model + " (" + type + ")";
}

NamedTensors Model::named_parameters() const {
  NamedTensors v;
  if (script_)
    for (const auto& p : script_->named_parameters(true)) v.emplace_back(p.name, p.value);
  else
    for (const auto& kv : seq_->named_parameters()) v.emplace_back(kv.key(), kv.value());
  return v;
}

NamedTensors Model::named_buffers() const {
  NamedTensors v;
  if (script_)
    for (const auto& b : script_->named_buffers(true)) v.emplace_back(b.name, b.value);
  else
    for (const auto& kv : seq_->named_buffers()) v.emplace_back(kv.key(), kv.value());
  return v;
}

std::vector<at::Tensor> Model::parameters() const {
  std::vector<at::Tensor> v;
  for (auto& [k, t] : named_parameters()) v.push_back(t);
  return v;
}

std::vector<at::Tensor> Model::buffers() const {
  std::vector<at::Tensor> v;
  for (auto& [k, t] : named_buffers()) v.push_back(t);
  return v;
}

at::Tensor Model::forward(const at::Tensor& input, NamedTensors* acts) {
  at::Tensor x = input;
  if (script_) {
    if (acts && script_is_sequential_) {
      for (auto child : script_->named_children()) {
        x = child.value.forward({x}).toTensor();
        acts->emplace_back(child.name, x.detach().clone());
      }
      return x;
    }
    x = script_->forward({x}).toTensor();
    if (acts) acts->emplace_back("output", x.detach().clone());
    return x;
  }
  if (!acts) return seq_->forward(x);
  auto names = seq_->named_children();
  size_t i = 0;
  for (auto& layer : *seq_) {
    x = layer.forward(x);
    acts->emplace_back(names[i++].key(), x.detach().clone());
  }
  return x;
}

std::vector<std::string> Model::layer_kinds() const {
  std::vector<std::string> kinds;
  if (script_) {
    if (!script_is_sequential_) return {"output"};
    for (const auto& child : script_->named_children())
      kinds.push_back(child.value.type()->name() ? child.value.type()->name()->qualifiedName() : "");
    return kinds;
  }
  for (const auto& child : seq_->named_children()) kinds.push_back(child.value()->name());
  return kinds;
}

int Model::set_dropout(bool enabled) {
  int switched = 0;
  // By class name, as PyTorch spells its dropout modules (a user's "NetWithDropout" is not one).
  auto is_dropout = [](std::string type) {
    type = type.substr(type.find_last_of(".:") == std::string::npos ? 0 : type.find_last_of(".:") + 1);
    if (type.size() > 4 && type.compare(type.size() - 4, 4, "Impl") == 0) type.resize(type.size() - 4);
    for (const char* d : {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"})
      if (type == d) return true;
    return false;
  };
  if (script_) {
    for (auto m : script_->modules())
      if (m.type()->name() && is_dropout(m.type()->name()->name())) {
        m.train(enabled);
        ++switched;
      }
    return switched;
  }
  for (const auto& m : seq_->modules(/*include_self=*/false))
    if (is_dropout(m->name())) {
      m->train(enabled);
      ++switched;
    }
  return switched;
}

bool Model::forward_is_stochastic(const at::Tensor& x) {
  torch::NoGradGuard ng;
  return !at::equal(forward(x), forward(x));
}

void Model::to(const at::Device& device) {
  if (script_)
    script_->to(device);
  else
    seq_->to(device);
}

}  // namespace ddp
