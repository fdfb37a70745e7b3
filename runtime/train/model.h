#pragma once
// The job's model behind one small interface, whatever it is built from:
//   "mlp"     Linear(F, hidden) -> ReLU -> Linear(hidden, classes) (the seed's model)
//   "mlp-bn"  the same with BatchNorm1d after the first layer (per-rank batch statistics: a classic DDP trap)
//   "cnn"     Conv(3,16)-ReLU-MaxPool-Conv(16,32)-ReLU-GlobalAvgPool-Linear(32, classes) for {3, H, W} images
//             (what an image dataset gets when the model is left at mlp)
//   PATH.pt   a TorchScript module exported from Python (torch.jit.script(model).save(PATH)), fed [batch, F] floats
//             and expected to return [batch, classes] logits.
#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/script.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/job_config.h"

namespace ddp {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class Model {
 public:
  // sample_shape: {F} for tabular data, {C, H, W} for images.
  Model(const JobConfig& job, const std::vector<int64_t>& sample_shape);

  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<at::Tensor> parameters() const;
  std::vector<at::Tensor> buffers() const;
  // Runs the model; with `acts`, keeps a copy of each layer's output under the layer's name (layer by layer for
  // Sequential models, the final output otherwise).
  at::Tensor forward(const at::Tensor& x, NamedTensors* acts = nullptr);
  // Module type of each layer reported in `acts` (e.g. "torch::nn::BatchNorm1dImpl").
  std::vector<std::string> layer_kinds() const;
  void to(const at::Device& device);
  const std::string& description() const { return description_; }

  // Dropout (any submodule whose type is a Dropout: nn.Dropout, Dropout1d/2d/3d, AlphaDropout...) on or off, the rest
  // of the model staying in train mode (BatchNorm keeps its batch statistics). Returns how many were switched. The
  // numerics check compares ranks with a single-process reference, which cannot draw the ranks' masks.
  int set_dropout(bool enabled);
  // True when two train-mode forwards of the same input differ (dropout or any other randomness in forward). Runs on
  // a copy of nothing: call it on a model whose state may change (BatchNorm's running statistics do).
  bool forward_is_stochastic(const at::Tensor& x);

 private:
  torch::nn::Sequential seq_{nullptr};
  std::optional<torch::jit::Module> script_;
  bool script_is_sequential_ = false;
  std::string description_;
};

}  // namespace ddp
