#include "traces/base/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace ddp {
namespace {

// A header larger than this is not one we wrote (safetensors itself refuses past 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

uint64_t le(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t k = n; k-- > 0;) v = (v << 8) | p[k];
  return v;
}

double half_to_double(uint16_t h) {
  const int exp = (h >> 10) & 0x1F, frac = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(frac, -24);
  if (exp == 31) return frac ? NAN : sign * INFINITY;
  return sign * std::ldexp(frac + 1024, exp - 25);
}

double bf16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Bytes per element of a dtype, 0 for one we do not read.
size_t element_size(const std::string& d) {
  if (d == "F64" || d == "I64") return 8;
  if (d == "F32" || d == "I32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

double element(const std::string& d, const unsigned char* p) {
  if (d == "F64" || d == "F32") {
    if (d == "F32") {
      const uint32_t bits = static_cast<uint32_t>(le(p, 4));
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    const uint64_t bits = le(p, 8);
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  if (d == "F16") return half_to_double(static_cast<uint16_t>(le(p, 2)));
  if (d == "BF16") return bf16_to_double(static_cast<uint16_t>(le(p, 2)));
  if (d == "I64") return static_cast<double>(static_cast<int64_t>(le(p, 8)));
  if (d == "I32") return static_cast<double>(static_cast<int32_t>(le(p, 4)));
  if (d == "I16") return static_cast<double>(static_cast<int16_t>(le(p, 2)));
  if (d == "I8") return static_cast<double>(static_cast<int8_t>(p[0]));
  return static_cast<double>(p[0]);  // U8, BOOL
}

bool read_entry(const std::string& name, const nlohmann::ordered_json& e, std::string_view data, PlainTensor& t,
                std::string& error) {
  auto bad = [&](const std::string& why) {
    error = "tensor \"" + name + "\": " + why;
    return false;
  };
  if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
      !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
      e["data_offsets"].size() != 2)
    return bad("needs dtype, shape and data_offsets [begin, end]");
  t.dtype = e["dtype"].get<std::string>();
  const size_t size = element_size(t.dtype);
  if (size == 0) return bad("dtype " + t.dtype + " is not one this reader knows");
  uint64_t numel = 1;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) return bad("a dimension that is not a non-negative integer");
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && numel > data.size() / n) return bad("a shape larger than the file");
    numel *= n;
    t.shape.push_back(static_cast<int64_t>(n));
  }
  const auto& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return bad("data_offsets that are not offsets");
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data.size()) return bad("data_offsets outside the file's data");
  if (end - begin != numel * size)
    return bad("holds " + std::to_string(end - begin) + " bytes for " + std::to_string(numel) + " x " +
               std::to_string(size));
  t.values.resize(numel);
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + begin);
  for (uint64_t i = 0; i < numel; ++i) t.values[i] = element(t.dtype, p + i * size);
  return true;
}

}  // namespace

bool parse_safetensors(std::string_view bytes, PlainTensors& out, std::string& error) {
  out.clear();
  if (bytes.size() < 8) {
    error = "shorter than the 8-byte header length (" + std::to_string(bytes.size()) + " bytes)";
    return false;
  }
  const uint64_t n = le(reinterpret_cast<const unsigned char*>(bytes.data()), 8);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    error = "a header of " + std::to_string(n) + " bytes in a file of " + std::to_string(bytes.size());
    return false;
  }
  const nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n), nullptr, false);
  if (!header.is_object()) {
    error = "the header is not a JSON object";
    return false;
  }
  const std::string_view data = bytes.substr(8 + n);
  std::vector<std::pair<uint64_t, PlainTensor>> at;  // (first byte, tensor)
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    PlainTensor t;
    t.name = it.key();
    if (!read_entry(it.key(), it.value(), data, t, error)) return false;
    at.emplace_back(it.value()["data_offsets"][0].get<uint64_t>(), std::move(t));
  }
  std::stable_sort(at.begin(), at.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [offset, t] : at) out.push_back(std::move(t));
  return true;
}

const PlainTensor* find_tensor(const PlainTensors& ts, std::string_view name) {
  for (const PlainTensor& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

bool read_safetensors(const std::string& path, PlainTensors& out, std::string& error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = path + ": cannot be opened";
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!parse_safetensors(bytes, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

}  // namespace ddp
