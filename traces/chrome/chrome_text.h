#pragma once
// Inside the Chrome reader: a document's text as the parser reads it, whole in memory or streamed from a file.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "traces/chrome/chrome_parse_errors.h"
#include "traces/chrome/chrome_status.h"

namespace ddp::chrome_parse {

// A document's text as the chunked reading asks for it: whole in memory, or streamed from a file through a window.
// Offsets only move forward: bytes before the last `at` asked for may be gone.
class DocText : public LineCounter {
 public:
  virtual std::string_view bytes(uint64_t at, size_t n) = 0;  // up to n bytes from `at`, fewer at the end
  virtual std::string_view rest(uint64_t at) = 0;             // every byte from `at` to the end
  virtual ChromeStatus read_error() const { return {}; }      // a file that could not be read to its end
};

class MemoryText final : public DocText {
 public:
  explicit MemoryText(std::string_view doc) : doc_(doc) {}
  std::string_view bytes(uint64_t at, size_t n) override { return at < doc_.size() ? doc_.substr(at, n) : ""; }
  std::string_view rest(uint64_t at) override { return bytes(at, doc_.size()); }
  uint64_t line_of(uint64_t offset) const override {
    const std::string_view before = doc_.substr(0, std::min<uint64_t>(offset, doc_.size()));
    return 1 + static_cast<uint64_t>(std::count(before.begin(), before.end(), '\n'));
  }

 private:
  std::string_view doc_;
};

// A plain JSON file read through a window of a few megabytes that slides forward: the text is never in memory whole
// (a 1 GB trace read into one buffer costs as much in page faults as the parsing), and a piece is copied out of a
// buffer that is already in the cache.
class FileText final : public DocText {
 public:
  FileText(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) { buf_.reserve(kBlock * 2); }

  std::string_view bytes(uint64_t at, size_t n) override {
    forget_before(at);
    const size_t from = start_ + static_cast<size_t>(at - buf_at_);
    while (buf_.size() < from + n && !eof_) read_block(from + n - buf_.size());
    return from < buf_.size() ? std::string_view(buf_).substr(from, n) : "";
  }
  std::string_view rest(uint64_t at) override {
    forget_before(at);
    while (!eof_) read_block(kBlock);
    return bytes(at, buf_.size());
  }
  uint64_t line_of(uint64_t offset) const override {
    // Errors are rare: the file is read again from its start to count.
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path_.c_str(), "rb"), &std::fclose);
    uint64_t line = 1, seen = 0;
    // No bigger than the bytes to count: a fuzzer's small damaged file spent seconds zeroing 4 MiB blocks (under
    // ASan) for the errors of its pieces, one count each.
    std::vector<char> block(static_cast<size_t>(std::min<uint64_t>(kBlock, std::max<uint64_t>(offset, 1))));
    while (f && seen < offset) {
      const size_t got = std::fread(block.data(), 1, std::min<uint64_t>(block.size(), offset - seen), f.get());
      if (got == 0) break;
      line += static_cast<uint64_t>(std::count(block.data(), block.data() + got, '\n'));
      seen += got;
    }
    return line;
  }
  ChromeStatus read_error() const override { return error_; }
  uint64_t size_read() const { return buf_at_ + (buf_.size() - start_); }

 private:
  static constexpr size_t kBlock = 4u << 20;

  // Drops the bytes before `at`, moving the kept ones to the front only when that costs less than what was read.
  void forget_before(uint64_t at) {
    start_ += static_cast<size_t>(std::min<uint64_t>(at - buf_at_, buf_.size() - start_));
    buf_at_ = at;
    if (start_ > buf_.size() / 2) {
      buf_.erase(0, start_);
      start_ = 0;
    }
  }
  void read_block(size_t at_least) {
    const size_t old = buf_.size();
    buf_.resize(old + std::max(at_least, kBlock));
    const size_t got = std::fread(buf_.data() + old, 1, buf_.size() - old, f_);
    buf_.resize(old + got);
    if (got == 0) {
      eof_ = true;
      if (std::ferror(f_)) error_ = make_chrome_error(ChromeError::cannot_open, path_ + ": read error");
    }
    if (size_read() > kMaxStreamedChromeJsonBytes) {
      eof_ = true;
      error_ = make_chrome_error(ChromeError::too_large, path_ + " is larger than 1 TiB");
    }
  }

  std::FILE* f_;
  std::string path_;
  std::string buf_;   // the window: file bytes [buf_at_ - start_, buf_at_ - start_ + buf_.size())
  size_t start_ = 0;  // where byte buf_at_ is in buf_
  uint64_t buf_at_ = 0;
  bool eof_ = false;
  ChromeStatus error_;
};

}  // namespace ddp::chrome_parse
