#pragma once
// The few protobuf wire-format writes Perfetto's trace needs (varints, fixed64, doubles, strings, nested messages),
// into a byte string. A nested message is written into its own buffer and framed by its length when closed: a trace
// packet is a few dozen bytes, so the copy costs nothing and no length is guessed ahead.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ddp::proto {

enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

inline void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

inline void tag(std::string& out, uint32_t field, Wire wire) { varint(out, (uint64_t{field} << 3) | wire); }

inline void uint_field(std::string& out, uint32_t field, uint64_t v) {
  tag(out, field, kVarint);
  varint(out, v);
}
// int32/int64 fields: two's complement as a 64-bit varint (negative numbers take 10 bytes, as protobuf writes them).
inline void int_field(std::string& out, uint32_t field, int64_t v) { uint_field(out, field, static_cast<uint64_t>(v)); }

inline void fixed64_field(std::string& out, uint32_t field, uint64_t v) {
  tag(out, field, kFixed64);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline void double_field(std::string& out, uint32_t field, double d) {
  uint64_t v;
  std::memcpy(&v, &d, sizeof v);
  fixed64_field(out, field, v);
}

inline void bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  tag(out, field, kLengthDelimited);
  varint(out, bytes.size());
  out.append(bytes);
}

// A nested message: fields go into body(), and close() frames them into the parent as field `field`.
class Nested {
 public:
  Nested(std::string& parent, uint32_t field) : parent_(parent), field_(field) {}
  Nested(const Nested&) = delete;
  Nested& operator=(const Nested&) = delete;
  ~Nested() { close(); }
  std::string& body() { return body_; }
  void close() {
    if (closed_) return;
    closed_ = true;
    bytes_field(parent_, field_, body_);
  }

 private:
  std::string& parent_;
  uint32_t field_;
  std::string body_;
  bool closed_ = false;
};

}  // namespace ddp::proto
