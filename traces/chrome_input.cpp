// The Chrome reader's input: a file read into memory, inflated when it is gzip (PyTorch profiler traces are often
// .json.gz).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>

#include "traces/chrome_reader.h"
#include "traces/chrome_status.h"

namespace ddp {

ChromeStatus gunzip(std::string_view gz, std::string& out) {
  out.clear();
  try {
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
      return make_chrome_error(ChromeError::decompress, "zlib init failed");
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);
    out.resize(std::max<size_t>(gz.size() * 4, 1 << 16));
    size_t produced = 0;
    size_t consumed = 0;
    constexpr size_t kChunk = 1u << 30;
    for (;;) {
      if (produced == out.size()) {
        if (out.size() >= kMaxChromeJsonBytes)
          return make_chrome_error(ChromeError::too_large,
                                   "decompressed trace exceeds " + std::to_string(kMaxChromeJsonBytes >> 30) + " GiB");
        out.resize(std::min<uint64_t>(out.size() * 2, kMaxChromeJsonBytes));
      }
      size_t in_now = std::min(gz.size() - consumed, kChunk);
      size_t out_now = std::min(out.size() - produced, kChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data() + consumed));
      zs.avail_in = static_cast<uInt>(in_now);
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      zs.avail_out = static_cast<uInt>(out_now);
      int ret = inflate(&zs, Z_NO_FLUSH);
      consumed += in_now - zs.avail_in;
      produced += out_now - zs.avail_out;
      if (ret == Z_STREAM_END) {
        // Concatenated gzip members continue; anything else after the stream is ignored (as gzip(1) does).
        if (gz.size() - consumed >= 2 && static_cast<unsigned char>(gz[consumed]) == 0x1f &&
            static_cast<unsigned char>(gz[consumed + 1]) == 0x8b) {
          inflateReset(&zs);
          continue;
        }
        break;
      }
      if (ret == Z_OK) continue;
      if (ret == Z_BUF_ERROR) {
        if (zs.avail_out == 0) continue;  // grow and go on
        if (consumed >= gz.size())
          return make_chrome_error(ChromeError::decompress, "gzip stream is truncated (after " +
                                                                std::to_string(consumed) + " compressed bytes)");
        continue;
      }
      return make_chrome_error(ChromeError::decompress,
                               std::string("gzip data is damaged: ") + (zs.msg ? zs.msg : "inflate error"));
    }
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
      raw.resize(static_cast<size_t>(size));
      raw.resize(std::fread(raw.data(), 1, raw.size(), f.get()));
    }
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) {
      raw.append(buf, n);
      if (raw.size() > kMaxChromeJsonBytes)
        return make_chrome_error(ChromeError::too_large, path + " is larger than 8 GiB");
    }
    if (std::ferror(f.get())) return make_chrome_error(ChromeError::cannot_open, path + ": read error");
    if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b) {
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

}  // namespace ddp
