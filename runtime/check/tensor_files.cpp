#include "runtime/check/tensor_files.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace ddp {

TensorDict load_tensor_dict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue v = torch::pickle_load(bytes);
  if (!v.isGenericDict()) throw std::runtime_error(path + " does not hold a dict");
  return v.toGenericDict();
}

at::Tensor tensor_at(const TensorDict& d, const std::string& key) {
  auto it = d.find(key);
  if (it == d.end()) throw std::runtime_error("missing tensor " + key);
  return it->value().toTensor();
}

std::vector<double> tensor_values(const at::Tensor& t) {
  at::Tensor c = t.detach().to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace ddp
