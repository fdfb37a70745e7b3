#include "runtime/train/pickle_file.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

namespace ddp {
std::vector<char> pickle_for_python(const c10::IValue& value) {
  std::vector<char> pkl;
  torch::jit::Pickler pickler([&](const char* p, size_t n) { pkl.insert(pkl.end(), p, p + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> out;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
      auto* c = static_cast<const char*>(p);
      out.insert(out.end(), c, c + n);
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pkl.data(), pkl.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  return out;
}
}  // namespace ddp
