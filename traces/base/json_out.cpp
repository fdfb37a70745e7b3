#include "traces/base/json_out.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include "traces/base/atomic_file.h"

namespace ddp {
namespace {

bool ends_with_gz(const std::string& path) { return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0; }

// A FILE* whose bytes are gzip-compressed into another FILE* (glibc's fopencookie), so JsonOut writes a .json.gz the
// way it writes a .json. Perfetto UI and chrome://tracing open gzip traces; JSON traces compress about 10-fold.
// Level 1: the export is limited by how fast it can write gigabytes, and higher levels gain little on trace JSON.
class GzipSink {
 public:
  explicit GzipSink(FILE* out) : out_(out) {
    ok_ = deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16 /* gzip header and trailer */, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~GzipSink() { deflateEnd(&z_); }
  FILE* open() {
    cookie_io_functions_t io{};
    io.write = [](void* c, const char* buf, size_t n) -> ssize_t {
      return static_cast<GzipSink*>(c)->deflate_some(buf, n, Z_NO_FLUSH) ? static_cast<ssize_t>(n) : -1;
    };
    io.close = [](void* c) -> int { return static_cast<GzipSink*>(c)->deflate_some(nullptr, 0, Z_FINISH) ? 0 : EOF; };
    return ok_ ? fopencookie(this, "w", io) : nullptr;
  }

 private:
  bool deflate_some(const char* buf, size_t n, int mode) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(buf));
    z_.avail_in = static_cast<uInt>(n);  // the cookie's buffer is a few KiB: never over 4 GiB
    int r = Z_OK;
    do {
      unsigned char chunk[1 << 16];
      z_.next_out = chunk;
      z_.avail_out = sizeof(chunk);
      r = deflate(&z_, mode);
      if (r == Z_STREAM_ERROR) return false;
      const size_t have = sizeof(chunk) - z_.avail_out;
      if (std::fwrite(chunk, 1, have, out_) != have) return false;
    } while (z_.avail_out == 0 || (mode == Z_FINISH && r != Z_STREAM_END));
    return true;
  }

  FILE* out_;
  z_stream z_{};
  bool ok_ = false;
};

}  // namespace

JsonOut::JsonOut(FILE* f) : f_(f), buf_(new char[kCap]) {}

void JsonOut::raw(std::string_view s) {
  ensure(s.size());
  std::memcpy(buf_.get() + n_, s.data(), s.size());
  n_ += s.size();
}

void JsonOut::ch(char c) {
  ensure(1);
  buf_[n_++] = c;
}

void JsonOut::num(int64_t v) {
  ensure(24);
  n_ = static_cast<size_t>(std::to_chars(buf_.get() + n_, buf_.get() + n_ + 24, v).ptr - buf_.get());
}

void JsonOut::unum(uint64_t v) {
  ensure(24);
  n_ = static_cast<size_t>(std::to_chars(buf_.get() + n_, buf_.get() + n_ + 24, v).ptr - buf_.get());
}

void JsonOut::micros(int64_t ns) {
  if (ns < 0) {
    ch('-');
    ns = -ns;
  }
  num(ns / 1000);
  const int64_t frac = ns % 1000;
  ensure(4);
  char* p = buf_.get() + n_;
  p[0] = '.';
  p[1] = static_cast<char>('0' + frac / 100);
  p[2] = static_cast<char>('0' + frac / 10 % 10);
  p[3] = static_cast<char>('0' + frac % 10);
  n_ += 4;
}

void JsonOut::str(std::string_view s) {
  ch('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      ch('\\');
      ch(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char tmp[8];
      std::snprintf(tmp, sizeof(tmp), "\\u%04x", c);
      raw(tmp);
    } else {
      ch(c);
    }
  }
  ch('"');
}

void JsonOut::flush() {
  if (n_ > 0) {
    if (std::fwrite(buf_.get(), 1, n_, f_) != n_) failed_ = true;
    written_ += n_;
    n_ = 0;
  }
}

void JsonOut::ensure(size_t k) {
  if (n_ + k > kCap) {
    flush();
    if (k > kCap) failed_ = true;  // never happens: no single piece is megabytes long
  }
}

bool write_json_file_atomically(const std::string& path, const std::function<void(JsonOut&)>& body, uint64_t& bytes,
                                std::string& error) {
  AtomicFile file(path);
  if (!file.is_open()) {
    error = file.open_error();
    return false;
  }
  bool ok = true;
  std::string thrown;  // the body failed with an exception (out of memory, bad input): the temp file goes too
  std::unique_ptr<GzipSink> gzip;
  std::unique_ptr<FILE, int (*)(FILE*)> compressed(nullptr, &std::fclose);
  if (ends_with_gz(path)) {
    gzip = std::make_unique<GzipSink>(file.file());
    compressed.reset(gzip->open());
    if (!compressed) {
      error = "cannot write " + path + ": zlib failed to start";
      return false;
    }
  }
  {
    JsonOut o(compressed ? compressed.get() : file.file());
    try {
      body(o);
    } catch (const std::exception& e) {
      thrown = e.what();
    } catch (...) {
      thrown = "unknown error";
    }
    o.flush();
    bytes = o.written();
    ok = !o.failed() && thrown.empty();
  }
  if (compressed) ok = std::fclose(compressed.release()) == 0 && ok;  // the gzip trailer, into the temp file
  if (!thrown.empty()) {
    error = "cannot write " + path + ": " + thrown + " (the previous file, if any, is left as it was)";
    return false;
  }
  if (!ok) {
    error = "write to " + path + " failed: " + std::strerror(errno) + " (the previous file, if any, is left as it was)";
    return false;
  }
  return file.commit(error);
}

void counter_event(JsonOut& o, std::string_view name, int64_t pid, int64_t ts_ns, uint64_t value) {
  constexpr EventLayout l = EventLayout::chrome;  // both exports write counters in the compact layout
  o.ch('{');
  event_key(o, l, "ph", true);
  o.raw("\"C\"");
  event_key(o, l, "name");
  o.str(name);
  event_key(o, l, "pid");
  o.num(pid);
  event_key(o, l, "ts");
  o.micros(ts_ns);
  event_key(o, l, "args");
  o.ch('{');
  event_key(o, l, "value", true);
  o.unum(value);
  o.raw("}}");
}

void event_key(JsonOut& o, EventLayout l, std::string_view k, bool first) {
  const bool spaced = l == EventLayout::kineto;
  if (!first) o.raw(spaced ? ", " : ",");
  o.ch('"');
  o.raw(k);
  o.raw(spaced ? "\": " : "\":");
}

namespace {
void key(JsonOut& o, EventLayout l, std::string_view k, bool first = false) { event_key(o, l, k, first); }

// "pid", "tid" and "ts": where and when an event is, in both layouts the same three keys in the same order.
void where(JsonOut& o, EventLayout l, int64_t pid, int64_t tid, int64_t ts_ns) {
  key(o, l, "pid");
  o.num(pid);
  key(o, l, "tid");
  o.num(tid);
  key(o, l, "ts");
  o.micros(ts_ns);
}

void metadata_head(JsonOut& o, EventLayout l, std::string_view name, int64_t pid, int64_t tid, std::string_view k) {
  o.ch('{');
  if (l == EventLayout::chrome) {
    key(o, l, "ph", true);
    o.raw("\"M\"");
    key(o, l, "name");
    o.str(name);
  } else {
    key(o, l, "name", true);
    o.str(name);
    key(o, l, "ph");
    o.raw("\"M\"");
  }
  key(o, l, "pid");
  o.num(pid);
  if (tid != kNoTid) {
    key(o, l, "tid");
    o.num(tid);
  }
  key(o, l, "args");
  o.ch('{');
  key(o, l, k, true);
}
}  // namespace

void metadata_event(JsonOut& o, EventLayout l, std::string_view name, int64_t pid, int64_t tid, std::string_view k,
                    std::string_view text) {
  metadata_head(o, l, name, pid, tid, k);
  o.str(text);
  o.raw("}}");
}

void metadata_event(JsonOut& o, EventLayout l, std::string_view name, int64_t pid, int64_t tid, std::string_view k,
                    int64_t number) {
  metadata_head(o, l, name, pid, tid, k);
  o.num(number);
  o.raw("}}");
}

void complete_event_head(JsonOut& o, EventLayout l, std::string_view name, std::string_view cat, int64_t pid,
                         int64_t tid, int64_t ts_ns, int64_t dur_ns) {
  o.ch('{');
  key(o, l, "ph", true);
  o.raw("\"X\"");
  // Chrome's layout names the event first, Kineto's (PyTorch's own order) its category.
  const bool name_first = l == EventLayout::chrome;
  key(o, l, name_first ? "name" : "cat");
  o.str(name_first ? name : cat);
  key(o, l, name_first ? "cat" : "name");
  o.str(name_first ? cat : name);
  where(o, l, pid, tid, ts_ns);
  key(o, l, "dur");
  o.micros(dur_ns);
  key(o, l, "args");
  o.ch('{');
}

void flow_event(JsonOut& o, EventLayout l, char ph, std::string_view name, uint64_t id, int64_t pid, int64_t tid,
                int64_t ts_ns) {
  o.ch('{');
  key(o, l, "ph", true);
  o.ch('"');
  o.ch(ph);
  o.ch('"');
  if (l == EventLayout::chrome) {
    key(o, l, "name");
    o.str(name);
    key(o, l, "cat");
    o.raw("\"ac2g\"");
  }
  key(o, l, "id");
  o.unum(id);
  where(o, l, pid, tid, ts_ns);
  if (l == EventLayout::kineto) {
    key(o, l, "cat");
    o.raw("\"ac2g\"");
    key(o, l, "name");
    o.str(name);
  }
  if (ph == 'f') {
    key(o, l, "bp");
    o.raw("\"e\"");
  }
  o.ch('}');
}

}  // namespace ddp
