#pragma once
// Reading the tensor files the checks compare (our dumps and checkpoints, the companion's dumps and reference):
// pickled dicts as torch.save and TorchScript's pickler write them. LibTorch.
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
