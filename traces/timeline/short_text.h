#pragma once
// A text of at most 8 bytes as one number, exactly (with its size): names and thread keys compared without a loop
// over their bytes or a call to memcmp.
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ddp {

// `s.size()` <= 8: its first four bytes and its last four (overlapping when shorter than 8: every byte), or under 4
// bytes the bytes themselves. Two texts of one size have the same bits only when they are the same.
inline uint64_t short_text_bits(std::string_view s) {
  const char* d = s.data();
  if (s.size() >= 4) {
    uint32_t first = 0, last = 0;
    std::memcpy(&first, d, 4);
    std::memcpy(&last, d + s.size() - 4, 4);
    return (static_cast<uint64_t>(first) << 32) | last;
  }
  uint64_t bits = 0;
  for (size_t i = 0; i < s.size(); ++i) bits = (bits << 8) | static_cast<unsigned char>(d[i]);
  return bits;
}

}  // namespace ddp
