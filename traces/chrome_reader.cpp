#include "traces/chrome_reader.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>

#ifdef DDP_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ddp {
namespace {

constexpr int kMaxDepth = 256;
constexpr size_t kMaxArgs = 32;
constexpr size_t kMaxTopLevelValue = 4u << 20;
constexpr uint64_t kMaxJsonBytes = 8ull << 30;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Microseconds as written in a trace ("123", "123.456", "1.2e3") to nanoseconds. Decimal text is converted exactly
// (no float rounding) so our own export round-trips to the nanosecond.
// Timestamps are clamped to +-2^61 ns (73 years): sums and differences of two of them cannot overflow.
constexpr int64_t kMaxNs = int64_t{1} << 61;
int64_t clamp_ns(int64_t v) { return std::clamp(v, -kMaxNs, kMaxNs); }

int64_t micros_text_to_ns_raw(std::string_view t, double fallback);
int64_t micros_text_to_ns(std::string_view t, double fallback) { return clamp_ns(micros_text_to_ns_raw(t, fallback)); }

int64_t micros_text_to_ns_raw(std::string_view t, double fallback) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && t[i] == '-') {
    neg = true;
    ++i;
  }
  int64_t whole = 0;
  size_t digits = 0;
  while (i < t.size() && is_digit(t[i])) {
    whole = whole * 10 + (t[i] - '0');
    ++i;
    if (++digits > 15) break;
  }
  int64_t frac = 0;
  int frac_digits = 0;
  bool round_up = false;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && is_digit(t[i])) {
      if (frac_digits < 3) {
        frac = frac * 10 + (t[i] - '0');
        ++frac_digits;
      } else if (frac_digits == 3) {
        round_up = t[i] >= '5';
        ++frac_digits;
      }
      ++i;
    }
  }
  if (i != t.size()) {  // exponent or a huge number: go through the double
    double ns = fallback * 1000.0;
    if (!std::isfinite(ns)) return 0;
    if (ns >= 9.2e18) return std::numeric_limits<int64_t>::max();
    if (ns <= -9.2e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(std::llround(ns));
  }
  while (frac_digits < 3) {
    frac *= 10;
    ++frac_digits;
  }
  int64_t ns = whole * 1000 + frac + (round_up ? 1 : 0);
  return neg ? -ns : ns;
}

class Parser {
 public:
  Parser(std::string_view s, const ChromeEventFn& fn, ChromeDocInfo& info)
      : b_(s.data()), p_(s.data()), e_(s.data() + s.size()), fn_(fn), info_(info) {
    arg_key_s_.resize(kMaxArgs);
    arg_val_s_.resize(kMaxArgs);
  }

  ChromeStatus run() {
    document();
    return status_;
  }

 private:
  bool fail(ChromeError err, const std::string& what) {
    if (status_.ok()) {
      status_.error = err;
      status_.offset = static_cast<uint64_t>(p_ - b_);
      uint64_t line = 1 + static_cast<uint64_t>(std::count(b_, p_, '\n'));
      status_.message = std::string(chrome_error_name(err)) + ": " + what + " at byte " +
                        std::to_string(status_.offset) + " (line " + std::to_string(line) + ")";
    }
    return false;
  }
  bool truncated(const char* inside) { return fail(ChromeError::truncated, std::string("input ends inside ") + inside); }
  bool syntax(const std::string& what) { return fail(ChromeError::syntax, what); }

  void ws() {
    while (p_ < e_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  // *p_ == '"'. `out` views the input when the string has no escapes, else `scratch`.
  bool string(std::string_view& out, std::string& scratch) {
    ++p_;
    const char* s = p_;
    while (p_ < e_) {
      char c = *p_;
      if (c == '"') {
        out = std::string_view(s, static_cast<size_t>(p_ - s));
        ++p_;
        return true;
      }
      if (c == '\\') break;
      if (static_cast<unsigned char>(c) < 0x20) return syntax("control character inside a string");
      ++p_;
    }
    if (p_ >= e_) return truncated("a string");
    scratch.assign(s, p_);
    while (p_ < e_) {
      char c = *p_++;
      if (c == '"') {
        out = scratch;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        --p_;
        return syntax("control character inside a string");
      }
      if (c != '\\') {
        scratch.push_back(c);
        continue;
      }
      if (p_ >= e_) return truncated("a string escape");
      char x = *p_++;
      switch (x) {
        case '"': case '\\': case '/': scratch.push_back(x); break;
        case 'b': scratch.push_back('\b'); break;
        case 'f': scratch.push_back('\f'); break;
        case 'n': scratch.push_back('\n'); break;
        case 'r': scratch.push_back('\r'); break;
        case 't': scratch.push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && e_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            const char* save = p_;
            p_ += 2;
            uint32_t lo = 0;
            if (!hex4(lo)) return false;
            if (lo >= 0xDC00 && lo < 0xE000)
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else
              p_ = save;
          }
          if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // lone surrogate
          append_utf8(scratch, cp);
          break;
        }
        default:
          --p_;
          return syntax("invalid escape in a string");
      }
    }
    return truncated("a string");
  }

  bool hex4(uint32_t& cp) {
    for (int i = 0; i < 4; ++i) {
      if (p_ >= e_) return truncated("a \\u escape");
      int h = hex_value(*p_);
      if (h < 0) return syntax("invalid \\u escape");
      cp = cp * 16 + static_cast<uint32_t>(h);
      ++p_;
    }
    return true;
  }

  bool skip_string() {
    ++p_;
    while (p_ < e_) {
      const char* q = static_cast<const char*>(std::memchr(p_, '"', static_cast<size_t>(e_ - p_)));
      if (!q) break;
      // Count the backslashes before the quote: odd means it is escaped.
      const char* k = q;
      while (k > p_ && k[-1] == '\\') --k;
      bool escaped = ((q - k) & 1) != 0;
      for (const char* c = p_; c < q; ++c)
        if (static_cast<unsigned char>(*c) < 0x20) {
          p_ = c;
          return syntax("control character inside a string");
        }
      p_ = q + 1;
      if (!escaped) return true;
    }
    p_ = e_;
    return truncated("a string");
  }

  bool number(ChromeValue& v) {
    const char* s = p_;
    const bool neg = *p_ == '-';
    if (neg) ++p_;
    if (p_ >= e_) return truncated("a number");
    uint64_t whole = 0;
    const char* digits = p_;
    if (*p_ == '0') {
      ++p_;
    } else if (is_digit(*p_)) {
      while (p_ < e_ && is_digit(*p_)) whole = whole * 10 + static_cast<uint64_t>(*p_++ - '0');
    } else {
      return syntax("invalid number");
    }
    if ((p_ >= e_ || (*p_ != '.' && *p_ != 'e' && *p_ != 'E')) && p_ - digits <= 18) {
      // an integer: no float parsing (most numbers in a trace are)
      v.type = ChromeValue::number;
      v.text = std::string_view(s, static_cast<size_t>(p_ - s));
      v.num = neg ? -static_cast<double>(whole) : static_cast<double>(whole);
      return true;
    }
    if (p_ < e_ && *p_ == '.') {
      ++p_;
      if (p_ >= e_) return truncated("a number");
      if (!is_digit(*p_)) return syntax("invalid number");
      while (p_ < e_ && is_digit(*p_)) ++p_;
    }
    if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < e_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= e_) return truncated("a number");
      if (!is_digit(*p_)) return syntax("invalid number");
      while (p_ < e_ && is_digit(*p_)) ++p_;
    }
    v.type = ChromeValue::number;
    v.text = std::string_view(s, static_cast<size_t>(p_ - s));
    v.num = 0;
    auto r = std::from_chars(s, p_, v.num);
    if (r.ec == std::errc::result_out_of_range) v.num = (*s == '-') ? -HUGE_VAL : HUGE_VAL;
    return true;
  }

  bool literal(std::string_view word) {
    size_t left = static_cast<size_t>(e_ - p_);
    if (left < word.size()) {
      if (std::string_view(p_, left) == word.substr(0, left)) return truncated("a literal");
      return syntax("invalid literal");
    }
    if (std::string_view(p_, word.size()) != word) return syntax("invalid literal");
    p_ += word.size();
    return true;
  }

  bool skip_value(int depth) {
    ws();
    if (p_ >= e_) return truncated("a value");
    if (depth > kMaxDepth) return fail(ChromeError::too_deep, "nesting deeper than " + std::to_string(kMaxDepth));
    char c = *p_;
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++p_;
      ws();
      if (p_ >= e_) return truncated(c == '{' ? "an object" : "an array");
      if (*p_ == close) {
        ++p_;
        return true;
      }
      for (;;) {
        if (c == '{') {
          ws();
          if (p_ >= e_) return truncated("an object");
          if (*p_ != '"') return syntax("expected a member name");
          if (!skip_string()) return false;
          if (!expect(':', "an object")) return false;
        }
        if (!skip_value(depth + 1)) return false;
        ws();
        if (p_ >= e_) return truncated(c == '{' ? "an object" : "an array");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ == close) {
          ++p_;
          return true;
        }
        return syntax(c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
    ChromeValue v;
    return scalar(v, scratch_);
  }

  bool scalar(ChromeValue& v, std::string& scratch) {
    char c = *p_;
    if (c == '"') {
      v.type = ChromeValue::string;
      return string(v.text, scratch);
    }
    if (c == 't' || c == 'f') {
      v.type = ChromeValue::boolean;
      v.num = c == 't' ? 1 : 0;
      v.text = c == 't' ? "true" : "false";
      return literal(v.text);
    }
    if (c == 'n') {
      v.type = ChromeValue::null;
      v.text = "null";
      return literal("null");
    }
    if (c == '-' || is_digit(c)) return number(v);
    return syntax(std::string("unexpected character '") + (static_cast<unsigned char>(c) >= 0x20 ? c : '?') + "'");
  }

  // Any value: scalars decoded, arrays/objects as raw text.
  bool value(ChromeValue& v, std::string& scratch, int depth) {
    ws();
    if (p_ >= e_) return truncated("a value");
    if (*p_ == '{' || *p_ == '[') {
      const char* s = p_;
      if (!skip_value(depth)) return false;
      v.type = ChromeValue::raw;
      v.text = std::string_view(s, static_cast<size_t>(p_ - s));
      return true;
    }
    return scalar(v, scratch);
  }

  bool expect(char c, const char* inside) {
    ws();
    if (p_ >= e_) return truncated(inside);
    if (*p_ != c) return syntax(std::string("expected '") + c + "'");
    ++p_;
    return true;
  }

  // Iterates the members of an object; *p_ == '{'. `member(key)` must consume the value.
  template <class F>
  bool members(const char* what, std::string& key_scratch, F&& member) {
    ++p_;
    ws();
    if (p_ >= e_) return truncated(what);
    if (*p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      ws();
      if (p_ >= e_) return truncated(what);
      if (*p_ != '"') return syntax("expected a member name");
      std::string_view key;
      if (!string(key, key_scratch)) return false;
      if (!expect(':', what)) return false;
      ws();
      if (p_ >= e_) return truncated(what);
      if (!member(key)) return false;
      ws();
      if (p_ >= e_) return truncated(what);
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      return syntax("expected ',' or '}'");
    }
  }

  bool time_value(bool& has, int64_t& ns) {
    ChromeValue v;
    if (!value(v, tmp_s_, 3)) return false;
    if (v.type == ChromeValue::number) {
      has = true;
      ns = micros_text_to_ns(v.text, v.num);
    } else if (v.type == ChromeValue::string && !v.text.empty()) {
      double d = 0;
      auto r = std::from_chars(v.text.data(), v.text.data() + v.text.size(), d);
      if (r.ec == std::errc() && r.ptr == v.text.data() + v.text.size()) {
        has = true;
        ns = micros_text_to_ns(v.text, d);
      }
    }
    return true;
  }

  bool event() {
    ChromeEventView ev;
    size_t nargs = 0;
    bool ok = members("an event", key_s_, [&](std::string_view key) {
      ChromeValue v;
      if (key == "ph") {
        if (!value(v, ph_s_, 3)) return false;
        if (v.type == ChromeValue::string && !v.text.empty()) ev.ph = v.text[0];
        return true;
      }
      if (key == "name" || key == "cat") {
        std::string& scratch = key == "name" ? name_s_ : cat_s_;
        if (!value(v, scratch, 3)) return false;
        if (v.type == ChromeValue::string || v.type == ChromeValue::number) (key == "name" ? ev.name : ev.cat) = v.text;
        return true;
      }
      if (key == "pid") return value(ev.pid, pid_s_, 3);
      if (key == "tid") return value(ev.tid, tid_s_, 3);
      if (key == "ts") return time_value(ev.has_ts, ev.ts_ns);
      if (key == "dur") return time_value(ev.has_dur, ev.dur_ns);
      if (key == "args" && *p_ == '{') {
        return members("an event's args", akey_s_, [&](std::string_view akey) {
          if (nargs >= kMaxArgs) return skip_value(3);
          std::string& ks = arg_key_s_[nargs];
          if (akey.data() == akey_s_.data()) {  // the key was unescaped into the shared scratch: keep a copy
            ks = akey_s_;
            akey = ks;
          }
          ChromeValue av;
          if (!value(av, arg_val_s_[nargs], 3)) return false;
          args_[nargs].key = akey;
          args_[nargs].value = av;
          ++nargs;
          return true;
        });
      }
      return skip_value(2);
    });
    if (!ok) return false;
    ev.args = args_.data();
    ev.arg_count = nargs;
    ++info_.events;
    if (fn_ && !fn_(ev)) stopped_ = true;
    return true;
  }

  bool events_array() {
    ++p_;  // '['
    ws();
    if (p_ >= e_) return truncated("the event array");
    if (*p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      ws();
      if (p_ >= e_) return truncated("the event array");
      if (*p_ == '{') {
        if (!event()) return false;
        if (stopped_) return true;
      } else if (!skip_value(2)) {
        return false;
      }
      ws();
      if (p_ >= e_) return truncated("the event array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      return syntax("expected ',' or ']' between events");
    }
  }

  void document() {
    ws();
    if (p_ >= e_) {
      fail(ChromeError::empty, "no JSON text");
      return;
    }
    if (*p_ == '[') {
      info_.array_format = true;
      if (!events_array()) return;
    } else if (*p_ == '{') {
      bool seen_events = false;
      bool ok = members("the trace object", key_s_, [&](std::string_view key) {
        if (key == "traceEvents" && *p_ == '[') {
          seen_events = true;
          return events_array();
        }
        std::string k(key);
        const char* s = p_;
        if (!skip_value(1)) return false;
        if (static_cast<size_t>(p_ - s) <= kMaxTopLevelValue) {
          nlohmann::json j = nlohmann::json::parse(s, p_, nullptr, /*allow_exceptions=*/false);
          if (!j.is_discarded()) info_.top[k] = std::move(j);
        }
        return !stopped_;
      });
      if (stopped_) return;
      if (!ok) return;
      if (!seen_events) {
        fail(ChromeError::not_a_trace, "the JSON object has no \"traceEvents\" array");
        return;
      }
    } else {
      ChromeValue v;
      if (!scalar(v, scratch_)) return;
      fail(ChromeError::not_a_trace, "the JSON document is a scalar, not a trace");
      return;
    }
    if (stopped_) return;
    ws();
    if (p_ < e_) syntax("unexpected characters after the JSON document");
  }

  const char* b_;
  const char* p_;
  const char* e_;
  const ChromeEventFn& fn_;
  ChromeDocInfo& info_;
  ChromeStatus status_;
  bool stopped_ = false;
  std::string scratch_, key_s_, akey_s_, ph_s_, name_s_, cat_s_, pid_s_, tid_s_, tmp_s_;
  std::vector<std::string> arg_key_s_, arg_val_s_;
  std::array<ChromeArg, kMaxArgs> args_{};
};

ChromeStatus make_error(ChromeError e, std::string msg) {
  ChromeStatus s;
  s.error = e;
  s.message = std::string(chrome_error_name(e)) + ": " + std::move(msg);
  return s;
}

}  // namespace

std::string_view chrome_error_name(ChromeError e) {
  switch (e) {
    case ChromeError::none: return "ok";
    case ChromeError::cannot_open: return "cannot open";
    case ChromeError::decompress: return "bad gzip data";
    case ChromeError::empty: return "empty input";
    case ChromeError::truncated: return "truncated JSON";
    case ChromeError::syntax: return "malformed JSON";
    case ChromeError::too_deep: return "JSON nested too deeply";
    case ChromeError::not_a_trace: return "not a Chrome trace";
    case ChromeError::too_large: return "input too large";
  }
  return "unknown error";
}

const ChromeValue* ChromeEventView::arg(std::string_view key) const {
  for (size_t i = 0; i < arg_count; ++i)
    if (args[i].key == key) return &args[i].value;
  return nullptr;
}

const std::string* ChromeEvent::arg(std::string_view key) const {
  for (const auto& kv : args)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

std::string ChromeDocInfo::producer() const {
  auto od = top.find("otherData");
  if (od != top.end() && od->is_object()) {
    auto p = od->find("producer");
    if (p != od->end() && p->is_string()) return p->get<std::string>();
  }
  if (top.contains("schemaVersion") || top.contains("deviceProperties") || top.contains("distributedInfo") ||
      top.contains("traceName"))
    return "kineto";
  return "";
}

ChromeStatus parse_chrome_json(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  try {
    Parser parser(json, on_event, info);
    return parser.run();
  } catch (const std::bad_alloc&) {
    return make_error(ChromeError::too_large, "out of memory while reading the trace");
  }
}

bool chrome_gzip_supported() {
#ifdef DDP_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

ChromeStatus gunzip(std::string_view gz, std::string& out) {
  out.clear();
#ifdef DDP_HAVE_ZLIB
  try {
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return make_error(ChromeError::decompress, "zlib init failed");
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, &inflateEnd);
    out.resize(std::max<size_t>(gz.size() * 4, 1 << 16));
    size_t produced = 0;
    size_t consumed = 0;
    constexpr size_t kChunk = 1u << 30;
    for (;;) {
      if (produced == out.size()) {
        if (out.size() >= kMaxJsonBytes)
          return make_error(ChromeError::too_large, "decompressed trace exceeds " +
                                                        std::to_string(kMaxJsonBytes >> 30) + " GiB");
        out.resize(std::min<uint64_t>(out.size() * 2, kMaxJsonBytes));
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
          return make_error(ChromeError::decompress, "gzip stream is truncated (after " + std::to_string(consumed) +
                                                         " compressed bytes)");
        continue;
      }
      return make_error(ChromeError::decompress,
                        std::string("gzip data is damaged: ") + (zs.msg ? zs.msg : "inflate error"));
    }
    out.resize(produced);
    return {};
  } catch (const std::bad_alloc&) {
    out.clear();
    return make_error(ChromeError::too_large, "out of memory while inflating");
  }
#else
  (void)gz;
  return make_error(ChromeError::decompress, "this build cannot read gzip (built without zlib)");
#endif
}

ChromeStatus read_chrome_bytes(const std::string& path, std::string& out) {
  out.clear();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return make_error(ChromeError::cannot_open, path + " is a directory");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_error(ChromeError::cannot_open, path + ": " + std::strerror(errno));
  try {
    std::string raw;
    // A regular file is read in one piece into a buffer of its size (no regrowth, each page touched once); a pipe or
    // a file still growing carries on in chunks.
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxJsonBytes) return make_error(ChromeError::too_large, path + " is larger than 8 GiB");
    if (!ec && size > 0) {
      raw.resize(static_cast<size_t>(size));
      raw.resize(std::fread(raw.data(), 1, raw.size(), f.get()));
    }
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) {
      raw.append(buf, n);
      if (raw.size() > kMaxJsonBytes) return make_error(ChromeError::too_large, path + " is larger than 8 GiB");
    }
    if (std::ferror(f.get())) return make_error(ChromeError::cannot_open, path + ": read error");
    if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b) {
      ChromeStatus s = gunzip(raw, out);
      if (!s.ok()) s.message = path + ": " + s.message;
      return s;
    }
    out = std::move(raw);
    return {};
  } catch (const std::bad_alloc&) {
    return make_error(ChromeError::too_large, "out of memory reading " + path);
  }
}

ChromeTrace read_chrome_text(std::string_view json) {
  ChromeTrace t;
  auto copy = [&t](const ChromeEventView& v) {
    ChromeEvent e;
    e.ph = v.ph;
    e.name = v.name;
    e.cat = v.cat;
    e.pid = v.pid.text;
    e.tid = v.tid.text;
    e.has_ts = v.has_ts;
    e.has_dur = v.has_dur;
    e.ts_ns = v.ts_ns;
    e.dur_ns = v.dur_ns;
    for (size_t i = 0; i < v.arg_count; ++i) e.args.emplace_back(v.args[i].key, v.args[i].value.text);
    t.events.push_back(std::move(e));
    return true;
  };
  try {
    t.status = parse_chrome_json(json, copy, t.info);
  } catch (const std::bad_alloc&) {
    t.status = make_error(ChromeError::too_large, "out of memory while reading the trace");
  }
  return t;
}

ChromeTrace read_chrome_file(const std::string& path) {
  std::string text;
  ChromeStatus s = read_chrome_bytes(path, text);
  if (!s.ok()) {
    ChromeTrace t;
    t.status = s;
    return t;
  }
  ChromeTrace t = read_chrome_text(text);
  if (!t.status.ok()) t.status.message = path + ": " + t.status.message;
  return t;
}

}  // namespace ddp
