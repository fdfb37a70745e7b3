#pragma once
// The start of every operator on one thread, kept to cut DataLoader waits at their first operator (kineto_file.cpp):
// nearly every event of a CPU trace is one, so 8 bytes each (16 with a vector's doubling room) were the import's
// largest cost, twice the rest. Kept instead as zigzag varint deltas in 64 KiB blocks: operators come about in time
// order, so a delta is two or three bytes, and a block never moves.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::kineto_detail {

class StartTimes {
 public:
  void push_back(int64_t t) {
    if (blocks_.empty() || blocks_.back().size() + 10 > kBlockBytes) blocks_.emplace_back().reserve(kBlockBytes);
    uint64_t z = zigzag(static_cast<uint64_t>(t) - static_cast<uint64_t>(last_));  // wraps: any delta is exact
    std::string& b = blocks_.back();
    while (z >= 0x80) {
      b.push_back(static_cast<char>(0x80 | (z & 0x7F)));
      z >>= 7;
    }
    b.push_back(static_cast<char>(z));
    ordered_ &= count_ == 0 || t >= last_;
    last_ = t;
    ++count_;
  }
  size_t size() const { return count_; }
  bool ordered() const { return ordered_; }  // every start at or after the one before it

  // Every start in the order they came.
  template <class F>
  void for_each(F&& f) const {
    int64_t t = 0;
    for (const std::string& b : blocks_) {
      for (size_t i = 0; i < b.size();) {
        uint64_t z = 0;
        for (int shift = 0;; shift += 7) {
          const auto byte = static_cast<unsigned char>(b[i++]);
          z |= static_cast<uint64_t>(byte & 0x7F) << shift;
          if (!(byte & 0x80)) break;
        }
        t = static_cast<int64_t>(static_cast<uint64_t>(t) + unzigzag(z));
        if (!f(t)) return;
      }
    }
  }
  std::vector<int64_t> sorted() const {
    std::vector<int64_t> out;
    out.reserve(count_);
    for_each([&](int64_t t) {
      out.push_back(t);
      return true;
    });
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static constexpr size_t kBlockBytes = 64u << 10;
  static uint64_t zigzag(uint64_t d) { return (d << 1) ^ (0 - (d >> 63)); }
  static uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }
  std::vector<std::string> blocks_;
  int64_t last_ = 0;
  size_t count_ = 0;
  bool ordered_ = true;
};

}  // namespace ddp::kineto_detail
