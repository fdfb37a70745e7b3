// ExtraTexts: the spans' args text, kept compressed (timeline.h says why).
#include <zstd.h>

#include "traces/timeline/timeline.h"

namespace ddp {
namespace {

constexpr size_t kBlockBytes = 64u << 10;
constexpr int kZstdLevel = 1;  // loading speed first: args text still shrinks about 5-fold

void put_varint(std::string& out, size_t n) {
  while (n >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (n & 0x7F)));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
}

// Reads a varint at `pos`; false when the block is damaged (never, for blocks we wrote).
bool get_varint(std::string_view in, size_t& pos, size_t& n) {
  n = 0;
  for (int shift = 0; pos < in.size() && shift < 35; shift += 7) {
    const auto b = static_cast<unsigned char>(in[pos++]);
    n |= static_cast<size_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

}  // namespace

void ExtraTexts::FreeContext::operator()(ZSTD_CCtx_s* c) const { ZSTD_freeCCtx(c); }

uint32_t ExtraTexts::add(std::string_view text) {
  if (open_.size() >= kBlockBytes) seal();
  put_varint(open_, text.size());
  open_.append(text);
  ++open_count_;
  return ++count_;
}

void ExtraTexts::seal() {
  if (open_count_ == 0) return;
  Block b;
  b.first = count_ - open_count_ + 1;
  b.count = open_count_;
  b.raw_size = static_cast<uint32_t>(open_.size());
  const size_t bound = ZSTD_compressBound(open_.size());
  if (scratch_size_ < bound) {
    scratch_.reset(new char[bound]);
    scratch_size_ = bound;
  }
  if (!context_) context_.reset(ZSTD_createCCtx());
  size_t n = 0;
  const bool packed = context_ && !ZSTD_isError(n = ZSTD_compressCCtx(context_.get(), scratch_.get(), bound,
                                                                      open_.data(), open_.size(), kZstdLevel));
  if (!packed) {
    b.packed = open_;
    b.compressed = false;
  } else {
    b.packed.assign(scratch_.get(), n);
  }
  blocks_.push_back(std::move(b));
  open_.clear();
  open_count_ = 0;
}

uint32_t ExtraTexts::append(ExtraTexts&& other) {
  seal();
  other.seal();
  const uint32_t offset = count_;
  for (Block& b : other.blocks_) {
    b.first += offset;
    blocks_.push_back(std::move(b));
  }
  count_ += other.count_;
  other = ExtraTexts{};
  return offset;
}

std::string ExtraTexts::at(uint32_t id) const {
  if (id == 0 || id > count_) return {};
  // The block holding `id`: the last one whose first id is not after it; ids past the sealed blocks are still open.
  std::string_view texts;
  std::string raw;
  uint32_t first = count_ - open_count_ + 1;
  if (id >= first) {
    texts = open_;
  } else {
    size_t lo = 0, hi = blocks_.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      (blocks_[mid].first <= id ? lo : hi) = mid;
    }
    const Block& b = blocks_[lo];
    first = b.first;
    if (!b.compressed) {
      texts = b.packed;
    } else {
      raw.resize(b.raw_size);
      const size_t n = ZSTD_decompress(raw.data(), raw.size(), b.packed.data(), b.packed.size());
      if (ZSTD_isError(n)) return {};
      texts = raw;
    }
  }
  size_t pos = 0, len = 0;
  for (uint32_t i = first;; ++i) {
    if (!get_varint(texts, pos, len) || len > texts.size() - pos) return {};
    if (i == id) return std::string(texts.substr(pos, len));
    pos += len;
  }
}

size_t ExtraTexts::memory_bytes() const {
  size_t n = open_.capacity() + blocks_.capacity() * sizeof(Block);
  for (const Block& b : blocks_) n += b.packed.capacity();
  return n;
}

}  // namespace ddp
