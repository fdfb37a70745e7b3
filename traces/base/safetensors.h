#pragma once
// Tensors in the safetensors layout (huggingface.co/docs/safetensors: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}} with an optional "__metadata__", then the raw
// little-endian bytes), read into plain values without LibTorch. The Python companion writes its gradient and
// activation dumps this way (python/ddp_profile/files.py, tensors_save) for the C++ judges; safetensors' own
// `load_file` reads them too.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

struct PlainTensor {
  std::string name;
  std::string dtype;           // as the file names it: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL
  std::vector<int64_t> shape;  // empty: a scalar
  std::vector<double> values;  // flattened in row-major order
};
// In the order of their bytes in the file (the order our writer gave them: a module's forward order), not by name.
using PlainTensors = std::vector<PlainTensor>;
// The tensor named `name`, or nullptr.
const PlainTensor* find_tensor(const PlainTensors& ts, std::string_view name);

// False with `error` saying what is wrong and where (the header's bytes, a tensor's name) when `bytes` is not a
// whole, consistent file: a header past the end, an unknown dtype, a tensor's bytes outside the data or of the
// wrong size for its shape.
bool parse_safetensors(std::string_view bytes, PlainTensors& out, std::string& error);
// The file at `path`, its name in the error.
bool read_safetensors(const std::string& path, PlainTensors& out, std::string& error);

}  // namespace ddp
