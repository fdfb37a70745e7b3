// ExtraTexts: the spans' args text, kept compressed or as the event's place in its file (timeline.h says why).
#include <sys/stat.h>
#include <zstd.h>

#include "traces/chrome/chrome_reader.h"
#include "traces/timeline/timeline.h"
#include "traces/timeline/timeline_sources.h"

namespace ddp {
namespace {

constexpr size_t kTextBlockBytes = 64u << 10;
// A place is a byte or two: a block of 4 KiB holds ~2500, all decoded to find one (microseconds).
constexpr size_t kPlaceBlockBytes = 4u << 10;
constexpr int kZstdLevel = 1;  // loading speed first: args text still shrinks about 5-fold

constexpr size_t kMaxVarintBytes = 10;

// Writes `n` at `out` (room for kMaxVarintBytes); the bytes written.
size_t write_varint(char* out, uint64_t n) {
  size_t len = 0;
  for (; n >= 0x80; n >>= 7) out[len++] = static_cast<char>(0x80 | (n & 0x7F));
  out[len++] = static_cast<char>(n);
  return len;
}

void put_varint(std::string& out, uint64_t n) {
  char bytes[kMaxVarintBytes];
  out.append(bytes, write_varint(bytes, n));
}

// Reads a varint at `pos`; false when the block is damaged (never, for blocks we wrote).
bool get_varint(std::string_view in, size_t& pos, uint64_t& n) {
  n = 0;
  for (int shift = 0; pos < in.size() && shift < 64; shift += 7) {
    const auto b = static_cast<unsigned char>(in[pos++]);
    n |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// A file's size and modification time, to tell that it changed since its places were taken.
bool file_stamp(const std::string& path, uint64_t& size, int64_t& mtime_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  size = static_cast<uint64_t>(st.st_size);
  mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return true;
}

}  // namespace

void ExtraTexts::FreeContext::operator()(ZSTD_CCtx_s* c) const { ZSTD_freeCCtx(c); }

bool ExtraTexts::open_block_takes(Kind kind, uint32_t file, uint64_t start) const {
  const size_t limit = kind == Kind::places ? kPlaceBlockBytes : kTextBlockBytes;
  return open_count_ > 0 && open_kind_ == kind && open_file_ == file && start >= open_end_ &&
         open_bytes().size() < limit;
}

std::string_view ExtraTexts::open_bytes() const {
  return open_kind_ == Kind::places ? std::string_view(places_.get(), places_size_) : std::string_view(open_);
}

void ExtraTexts::open_block(Kind kind, uint32_t file, uint64_t start) {
  if (open_count_ > 0 && !open_block_takes(kind, file, start)) seal();
  if (open_count_ == 0) {
    open_kind_ = kind;
    open_file_ = file;
    open_start_ = open_end_ = start;
    // a block takes places while under kPlaceBlockBytes: one more may pass it by a varint
    if (kind == Kind::places && !places_) places_.reset(new char[kPlaceBlockBytes + kMaxVarintBytes]);
    places_size_ = 0;
  }
}

uint32_t ExtraTexts::add(std::string_view text) {
  open_block(Kind::texts, 0, 0);
  put_varint(open_, text.size());
  open_.append(text);
  ++open_count_;
  return ++count_;
}

uint32_t ExtraTexts::add_file(const std::string& path) {
  SourceFile f;
  f.path = path;
  file_stamp(path, f.size, f.mtime_ns);
  files_.push_back(std::move(f));
  return static_cast<uint32_t>(files_.size() - 1);
}

uint32_t ExtraTexts::add_place(uint32_t file, uint64_t offset) {
  // Nearly every span of a Kineto trace comes here: open_block only when the open block cannot take it (a block is
  // sealed or opened once in ~2500 places).
  if (!open_block_takes(Kind::places, file, offset)) open_block(Kind::places, file, offset);
  // events follow each other in the file: the gap is an event's length
  places_size_ += write_varint(places_.get() + places_size_, offset - open_end_);
  open_end_ = offset;
  ++open_count_;
  return ++count_;
}

void ExtraTexts::seal() {
  if (open_count_ == 0) return;
  Block b;
  b.first = count_ - open_count_ + 1;
  b.count = open_count_;
  b.raw_size = static_cast<uint32_t>(open_bytes().size());
  b.kind = open_kind_;
  b.file = open_file_;
  b.start = open_start_;
  if (open_kind_ == Kind::places) {
    b.packed = open_bytes();  // varints already: nothing left to squeeze cheaply
    places_size_ = 0;
  } else {
    const size_t bound = ZSTD_compressBound(open_.size());
    if (scratch_size_ < bound) {
      scratch_.reset(new char[bound]);
      scratch_size_ = bound;
    }
    if (!context_) context_.reset(ZSTD_createCCtx());
    size_t n = 0;
    const bool packed = context_ && !ZSTD_isError(n = ZSTD_compressCCtx(context_.get(), scratch_.get(), bound,
                                                                        open_.data(), open_.size(), kZstdLevel));
    if (packed) {
      b.packed.assign(scratch_.get(), n);
    } else {
      b.packed = open_;
      b.kind = Kind::raw_texts;
    }
  }
  blocks_.push_back(std::move(b));
  open_.clear();
  open_count_ = 0;
}

uint32_t ExtraTexts::append(ExtraTexts&& other) {
  seal();
  other.seal();
  const uint32_t offset = count_;
  const uint32_t file_offset = static_cast<uint32_t>(files_.size());
  for (Block& b : other.blocks_) {
    b.first += offset;
    if (b.kind == Kind::places) b.file += file_offset;
    blocks_.push_back(std::move(b));
  }
  for (SourceFile& f : other.files_) files_.push_back(std::move(f));
  count_ += other.count_;
  other = ExtraTexts{};
  return offset;
}

std::string ExtraTexts::text_at(const Block& b, uint32_t id) const {
  std::string_view texts = b.packed;
  std::string raw;
  if (b.kind == Kind::texts) {
    raw.resize(b.raw_size);
    const size_t n = ZSTD_decompress(raw.data(), raw.size(), b.packed.data(), b.packed.size());
    if (ZSTD_isError(n)) return {};
    texts = raw;
  }
  size_t pos = 0;
  uint64_t len = 0;
  for (uint32_t i = b.first;; ++i) {
    if (!get_varint(texts, pos, len) || len > texts.size() - pos) return {};
    if (i == id) return std::string(texts.substr(pos, len));
    pos += len;
  }
}

std::string ExtraTexts::place_at(const Block& b, uint32_t id) const {
  size_t pos = 0;
  uint64_t offset = b.start, gap = 0;
  for (uint32_t i = b.first;; ++i) {
    if (!get_varint(b.packed, pos, gap)) return {};
    offset += gap;
    if (i == id) break;
  }
  if (b.file >= files_.size()) return {};
  const SourceFile& f = files_[b.file];
  uint64_t now_size = 0;
  int64_t now_mtime = 0;
  if (!file_stamp(f.path, now_size, now_mtime) || now_size != f.size || now_mtime != f.mtime_ns)
    return "(args not shown: " + f.path + " changed since it was loaded)";
  std::string text, error;
  const bool read = read_chrome_event_at(
      f.path, offset,
      [&](const ChromeEventView& e) {
        timeline_detail::append_shown_args(e, text);
        return true;
      },
      error);
  return read ? text : "(args not shown: " + error + ")";
}

std::string ExtraTexts::at(uint32_t id) const {
  if (id == 0 || id > count_) return {};
  if (id >= count_ - open_count_ + 1) {  // still in the open block
    Block open;
    open.first = count_ - open_count_ + 1;
    open.kind = open_kind_ == Kind::places ? Kind::places : Kind::raw_texts;
    open.file = open_file_;
    open.start = open_start_;
    open.packed = open_bytes();
    return open.kind == Kind::places ? place_at(open, id) : text_at(open, id);
  }
  // The block holding `id`: the last one whose first id is not after it.
  size_t lo = 0, hi = blocks_.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (blocks_[mid].first <= id ? lo : hi) = mid;
  }
  const Block& b = blocks_[lo];
  return b.kind == Kind::places ? place_at(b, id) : text_at(b, id);
}

size_t ExtraTexts::memory_bytes() const {
  size_t n = open_.capacity() + blocks_.capacity() * sizeof(Block) + files_.capacity() * sizeof(SourceFile) +
             (places_ ? kPlaceBlockBytes + kMaxVarintBytes : 0);
  for (const Block& b : blocks_) n += b.packed.capacity();
  return n;
}

}  // namespace ddp
