#include "runtime/permutation.h"

#include <ATen/ATen.h>

#include "runtime/torch_compat.h"

namespace ddp {
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int epoch, bool shuffle) {
  std::vector<int64_t> order(n);
  if (!shuffle) {
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    return order;
  }
  at::Generator g = compat::cpu_generator(seed + static_cast<uint64_t>(epoch));
  at::Tensor p = at::randperm(n, g, at::TensorOptions().dtype(at::kLong));
  const int64_t* d = p.data_ptr<int64_t>();
  order.assign(d, d + n);
  return order;
}
}  // namespace ddp
