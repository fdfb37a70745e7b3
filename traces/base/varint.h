#pragma once
// LEB128 varints and zig-zag signed integers: how our compact formats (the native trace's event blocks, digests)
// write numbers, and the one reader of them, which never reads past its end (a damaged block makes `ok` false).
#include <cstdint>

namespace ddp {

// Appends `v` as a varint to a byte container (std::string, std::vector<uint8_t>).
template <typename Bytes>
void put_varint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<typename Bytes::value_type>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<typename Bytes::value_type>(v));
}

inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// Reads varints and bytes from [p, end); a read past the end, or a varint of more than 10 bytes, makes `ok` false
// and returns 0.
struct VarintReader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      const uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  uint8_t byte() {
    if (p >= end) {
      ok = false;
      return 0;
    }
    return *p++;
  }
};

}  // namespace ddp
