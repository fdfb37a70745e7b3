#pragma once
#include <cstddef>
#include <cstdint>

namespace ddp {
// CRC-32 (IEEE 802.3, reflected, as zlib computes it): each trace chunk carries one so damage is detected.
uint32_t crc32(const void* data, size_t size, uint32_t seed = 0);
}  // namespace ddp
