#pragma once
// Reading our job's tensor files the checks compare (its dumps and checkpoints): pickled dicts as torch.save and
// TorchScript's pickler write them. LibTorch. (The companion's dumps are safetensors: traces/base/safetensors.h.)
#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace ddp {

using TensorDict = c10::impl::GenericDict;
// The dict in PATH; throws naming the file when it cannot be read or holds no dict.
TensorDict load_tensor_dict(const std::string& path);
// The tensor under KEY; throws naming the key when missing.
at::Tensor tensor_at(const TensorDict& d, const std::string& key);
// A tensor's values as doubles, flattened.
std::vector<double> tensor_values(const at::Tensor& t);

}  // namespace ddp
