// The Chrome reader's input: a plain file streamed through the chunked reading, or read into memory and inflated
// when it is gzip (PyTorch profiler traces are often .json.gz).
#include <libdeflate.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "traces/base/read_progress.h"
#include "traces/chrome/chrome_lenient.h"
#include "traces/chrome/chrome_pieces.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/chrome/chrome_status.h"
#include "traces/chrome/chrome_text.h"

namespace ddp {

namespace {

// simdjson reads this many bytes past the end of the text: buffers we fill for the parser keep them (zeroed).
constexpr size_t kJsonPadding = 64;

bool is_gzip(std::string_view s) {
  return s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x1f && static_cast<unsigned char>(s[1]) == 0x8b;
}

// An ISIZE above this many times the compressed size is not trusted (gzip_first_size_guess says why).
constexpr uint64_t kMaxTrustedRatio = 64;

// The same magic check on an open file's first bytes (then back to its start).
bool file_starts_as_gzip(std::FILE* f) {
  char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::rewind(f);
  return is_gzip(std::string_view(magic, got));
}

// The gzip trailer's ISIZE: the last member's inflated size modulo 2^32.
uint64_t trailer_isize(std::string_view gz, size_t min_size = 18) {
  if (gz.size() < min_size) return 0;
  const auto* t = reinterpret_cast<const unsigned char*>(gz.data() + gz.size() - 4);
  return uint64_t{t[0]} | uint64_t{t[1]} << 8 | uint64_t{t[2]} << 16 | uint64_t{t[3]} << 24;
}

}  // namespace

// The first guess of the inflated size: ISIZE, exact for a single member under 4 GiB. An ISIZE below the compressed
// size cannot be the whole output (a file over 4 GiB, modulo 2^32, or a small last member of several), and one above
// kMaxTrustedRatio times it is more likely a damaged trailer than trace JSON (which compresses 10-30 fold): then eight
// times the compressed size, a common ratio for trace JSON, grown as the data asks (a damaged file then fails in a
// small buffer instead of zeroing hundreds of megabytes first: a fuzzer's 0.45 MB input took 0.5 s that way). Never
// more than DEFLATE's largest ratio (1032:1) allows.
uint64_t gzip_first_size_guess(std::string_view gz) {
  const uint64_t isize = trailer_isize(gz);
  const bool plausible = isize >= gz.size() && isize <= uint64_t{gz.size()} * kMaxTrustedRatio;
  const uint64_t guess = plausible ? isize : uint64_t{gz.size()} * 8;
  return std::min<uint64_t>({guess, uint64_t{gz.size()} * 1032 + 64, kMaxChromeJsonBytes});
}

// More room after a member did not fit. Where the last member's ISIZE can still be right (the true size is
// produced + ISIZE + k * 4 GiB, and DEFLATE cannot expand the remaining bytes more than 1032-fold), the next such size;
// otherwise (a member before the last, or a damaged trailer) twice the room.
uint64_t gzip_grown_size(uint64_t room, size_t produced, size_t compressed_left, std::string_view gz) {
  uint64_t next = produced + trailer_isize(gz);
  while (next <= room) next += uint64_t{1} << 32;
  if (next > produced + compressed_left * uint64_t{1032}) next = std::max<uint64_t>(room * 2, 4096);
  return std::min<uint64_t>(next, kMaxChromeJsonBytes);
}

namespace {

ChromeStatus too_large_inflated() {
  return make_chrome_error(ChromeError::too_large,
                           "decompressed trace exceeds " + std::to_string(kMaxChromeJsonBytes >> 30) + " GiB");
}

}  // namespace

ChromeStatus gunzip(std::string_view gz, std::string& out) {
  out.clear();
  try {
    std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(libdeflate_alloc_decompressor(),
                                                                                   &libdeflate_free_decompressor);
    if (!d) return make_chrome_error(ChromeError::too_large, "out of memory for the gzip decompressor");
    uint64_t room = gzip_first_size_guess(gz);
    out.resize(room + kJsonPadding);
    size_t produced = 0;
    size_t consumed = 0;
    // One gzip member per turn: concatenated members continue; anything else after a member is ignored (as
    // gzip(1) does).
    do {
      size_t in_used = 0;
      size_t out_made = 0;
      const libdeflate_result r =
          libdeflate_gzip_decompress_ex(d.get(), gz.data() + consumed, gz.size() - consumed, out.data() + produced,
                                        room - produced, &in_used, &out_made);
      if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
        if (room >= kMaxChromeJsonBytes) return out.clear(), too_large_inflated();
        room = gzip_grown_size(room, produced, gz.size() - consumed, gz);
        out.resize(room + kJsonPadding);
        continue;  // the member again, into the larger buffer
      }
      if (r != LIBDEFLATE_SUCCESS)
        return out.clear(), make_chrome_error(ChromeError::decompress,
                                              "gzip data is damaged or truncated (member at compressed byte " +
                                                  std::to_string(consumed) + ")");
      consumed += in_used;
      produced += out_made;
    } while (is_gzip(gz.substr(consumed)));
    // Shrinking keeps the capacity: the zeroed bytes after the text stay as simdjson's padding.
    out.resize(produced);
    return {};
  } catch (const std::bad_alloc&) {
    out.clear();
    return make_chrome_error(ChromeError::too_large, "out of memory while inflating");
  }
}

ChromeStatus read_chrome_bytes(const std::string& path, std::string& out) {
  out.clear();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_chrome_error(ChromeError::cannot_open, path + " is a directory");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_chrome_error(ChromeError::cannot_open, path + ": " + std::strerror(errno));
  try {
    std::string raw;
    // A regular file is read in one piece into a buffer of its size (no regrowth, each page touched once); a pipe or
    // a file still growing carries on in chunks.
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxChromeJsonBytes)
      return make_chrome_error(ChromeError::too_large, path + " is larger than 8 GiB");
    if (!ec && size > 0) {
      raw.resize(static_cast<size_t>(size) + kJsonPadding);  // the padding simdjson reads past the end, zeroed
      raw.resize(std::fread(raw.data(), 1, static_cast<size_t>(size), f.get()));
    }
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) {
      raw.append(buf, n);
      if (raw.size() > kMaxChromeJsonBytes)
        return make_chrome_error(ChromeError::too_large, path + " is larger than 8 GiB");
    }
    if (std::ferror(f.get())) return make_chrome_error(ChromeError::cannot_open, path + ": read error");
    if (is_gzip(raw)) {
      ChromeStatus s = gunzip(raw, out);
      if (!s.ok()) s.message = path + ": " + s.message;
      return s;
    }
    out = std::move(raw);
    return {};
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory reading " + path);
  }
}

ChromeStatus chrome_parse::parse_file_strict(const std::string& path, const ChromeEventFn& on_event,
                                             ChromeDocInfo& info) {
  trace_read_progress().reading(path);
  try {
    std::error_code ec;
    std::unique_ptr<FILE, int (*)(FILE*)> f(
        std::filesystem::is_directory(path, ec) ? nullptr : std::fopen(path.c_str(), "rb"), &std::fclose);
    // gzip is inflated whole (libdeflate needs it so); so is a file that cannot be opened, for read_chrome_bytes's
    // errors.
    if (f && !file_starts_as_gzip(f.get())) {
      chrome_parse::FileText doc(f.get(), path);
      bool done = false;
      ChromeStatus s = chrome_parse::parse_chunked(doc, on_event, info, done);
      if (done) return s;
      if (!doc.read_error().ok()) return doc.read_error();
    }
    std::string text;
    ChromeStatus s = read_chrome_bytes(path, text);
    if (!s.ok()) return s;
    info = ChromeDocInfo{};
    return parse_json_strict(text, on_event, info);
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading " + path);
  }
}

bool chrome_file_is_gzip(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  return f && file_starts_as_gzip(f.get());
}

namespace {

// The length of the JSON object that opens `text` (its braces matched outside strings), or 0 when it does not close
// within `text`. Only to know how many bytes to hand the parser, which then checks them.
size_t object_length(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return 0;
}

}  // namespace

bool read_chrome_event_at(const std::string& path, uint64_t offset, const ChromeEventFn& on_event, std::string& error) {
  constexpr size_t kMaxEventBytes = 16u << 20;  // an event's args are kilobytes; more is not an event we placed
  const std::string no_event =
      path + ": no event at byte " + std::to_string(offset) + " (the file changed since it was read)";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    error = path + ": " + std::strerror(errno);
    return false;
  }
  if (fseeko(f.get(), static_cast<off_t>(offset), SEEK_SET) != 0) {
    error = no_event;
    return false;
  }
  // The event as the only element of an array, a trace parse_chrome_json reads: read until its object closes.
  std::string text = "[";
  size_t length = 0;
  for (size_t want = 4096; length == 0 && text.size() - 1 < kMaxEventBytes; want *= 4) {
    const size_t have = text.size();
    text.resize(have + want);
    const size_t got = std::fread(&text[have], 1, want, f.get());
    text.resize(have + got);
    if (text.size() < 2 || text[1] != '{') break;
    length = object_length(std::string_view(text).substr(1));
    if (got < want) break;  // the end of the file
  }
  if (length == 0) {
    error = no_event;
    return false;
  }
  text.resize(1 + length);
  text.push_back(']');
  size_t events = 0;
  ChromeDocInfo info;
  const ChromeStatus s = parse_chrome_json(
      text, [&](const ChromeEventView& e) { return ++events == 1 && on_event(e); }, info);
  if (!s.ok() || events != 1) {
    error = no_event;
    return false;
  }
  return true;
}

uint64_t chrome_text_bytes_estimate(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return 0;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f || !file_starts_as_gzip(f.get()) || size < 4) return size;
  // The trailer's ISIZE when it can be the text's size (one member under 4 GiB), else the ratio JSON traces have.
  char t[4] = {};
  if (std::fseek(f.get(), -4, SEEK_END) != 0 || std::fread(t, 1, 4, f.get()) != 4) return size * 8;
  const uint64_t isize = trailer_isize(std::string_view(t, 4), 4);
  return isize >= size && isize <= size * kMaxTrustedRatio ? isize : size * 8;
}

}  // namespace ddp
