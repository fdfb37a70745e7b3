// The streaming Chrome-trace JSON parser behind parse_chrome_json: one pass over the text, every event handed to the
// callback as views into the input (or into scratch strings when the text has escapes), no DOM.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <new>
#include <vector>

#include "traces/chrome_json_text.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_status.h"

namespace ddp {
namespace {

using chrome_json::append_utf8;
using chrome_json::hex_value;
using chrome_json::is_digit;
using chrome_json::micros_text_to_ns;

constexpr int kMaxDepth = 256;
constexpr size_t kMaxArgs = 32;
constexpr size_t kMaxTopLevelValue = 4u << 20;

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
      if (key == "id") return value(ev.id, id_s_, 3);
      if (key == "bp" || key == "s") {
        if (!value(v, key == "bp" ? bp_s_ : scope_s_, 3)) return false;
        if (v.type == ChromeValue::string) (key == "bp" ? ev.bp : ev.scope) = v.text;
        return true;
      }
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
  std::string scratch_, key_s_, akey_s_, ph_s_, name_s_, cat_s_, pid_s_, tid_s_, tmp_s_, id_s_, bp_s_, scope_s_;
  std::vector<std::string> arg_key_s_, arg_val_s_;
  std::array<ChromeArg, kMaxArgs> args_{};
};

}  // namespace

ChromeStatus parse_chrome_json(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  try {
    Parser parser(json, on_event, info);
    return parser.run();
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
}

}  // namespace ddp
