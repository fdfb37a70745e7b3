#pragma once
// Pickled files that Python's torch.load(path, weights_only=True) accepts. torch::pickle_save tags every dict and
// list with torch.jit._pickle.restore_type_tag, a global the weights-only unpickler refuses; these are written with
// aggregate tags off, so the only globals are collections.OrderedDict, torch._utils._rebuild_tensor_v2 and the
// storage types.
#include <ATen/core/ivalue.h>

#include <vector>

namespace ddp {
std::vector<char> pickle_for_python(const c10::IValue& value);
}  // namespace ddp
