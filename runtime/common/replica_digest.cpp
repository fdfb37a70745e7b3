#include "runtime/common/replica_digest.h"

#include <cstdio>
#include <cstring>

namespace ddp {
namespace {
constexpr size_t kRows = 256, kLanes = 16, kBlockBytes = kRows * kLanes * 8;
constexpr uint64_t kFnvPrime = 1099511628211ull;
}  // namespace

void ReplicaDigest::add(const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  uint64_t a[kLanes] = {}, b = 0;
  for (size_t start = 0, k = 0; start < n; start += kBlockBytes, ++k) {
    uint64_t lanes[kLanes] = {}, weighted = 0;
    for (size_t r = 0; r < kRows; ++r) {
      uint64_t row = 0;
      for (size_t l = 0; l < kLanes; ++l) {
        const size_t at = start + (r * kLanes + l) * 8;
        uint64_t w = 0;
        if (at + 8 <= n)
          std::memcpy(&w, p + at, 8);
        else if (at < n)
          std::memcpy(&w, p + at, n - at);  // the last word's bytes, zero-padded (little endian)
        lanes[l] += w;
        row += w;
      }
      weighted += (r + 1) * row;
    }
    const uint64_t odd = 2 * k + 1;
    for (size_t l = 0; l < kLanes; ++l) a[l] += odd * lanes[l];
    b += odd * weighted;
  }
  // FNV-1a's step, then a xor-shift: FNV alone keeps a difference in bit 63 in bit 63, so two of them (A's and B's
  // for a word flipped in its top bit) would cancel.
  auto fold = [&](uint64_t w) {
    h_ = (h_ ^ w) * kFnvPrime;
    h_ ^= h_ >> 32;
  };
  fold(n);
  for (uint64_t w : a) fold(w);
  fold(b);
}

std::string ReplicaDigest::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
  return buf;
}

}  // namespace ddp
