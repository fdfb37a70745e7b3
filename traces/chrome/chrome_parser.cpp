// The parser behind parse_chrome_json and parse_chrome_file: simdjson's On-Demand API (its first pass indexes the
// structure with SIMD, then we pull each event's fields in file order), every event handed to the callback as views
// into the text or into simdjson's string buffer (strings with escapes), no DOM. Big texts and files are read in
// pieces cut between events ("chunked reading" below).
//
// On-Demand validates what it is asked for, so every value of an event and of the top level is visited (nested
// values too, with our own depth limit, since On-Demand has none). Its errors say what but rarely where: the parser
// remembers the token it was reading, and errors at the end of the text are called truncated.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <vector>

#include "traces/chrome/chrome_json_text.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/chrome/chrome_status.h"

namespace ddp {
namespace {

namespace od = simdjson::ondemand;
using chrome_json::micros_text_to_ns;

constexpr int kMaxDepth = 256;
constexpr size_t kMaxArgs = 32;
constexpr size_t kMaxTopLevelValue = 4u << 20;
// A document whose root is not closed is re-read inside a wrapper to tell truncation from a syntax error or too deep
// nesting; above this size it is called truncated without that second reading (a cut file is by far the likelier).
constexpr size_t kMaxDiagnosedBytes = 64u << 20;
constexpr size_t kMaxReusedParserBytes = 64u << 20;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The contents of the string whose opening quote is just before `p`, when it has no escapes (the common case: a view,
// no copy). simdjson's first pass has checked that every string is closed, so the scan stops before the text's end.
bool plain_string(const char* p, std::string_view& out) {
  const char* q = p;
  while (*q != '"' && *q != '\\') ++q;
  if (*q != '"') return false;
  out = std::string_view(p, static_cast<size_t>(q - p));
  return true;
}

// Line numbers for error messages: counted in the text in memory, or in the file a streamed text comes from.
class LineCounter {
 public:
  virtual ~LineCounter() = default;
  virtual uint64_t line_of(uint64_t offset) const = 0;  // 1-based line of byte `offset`
};

class Parser {
 public:
  // `text` is the JSON inside `buf`, which stays readable for simdjson's padding after it; `origin` is where byte 0
  // of the user's text is (the wrapper of the diagnosis reading adds one byte in front).
  // `base` is the offset in the whole document of the user text's first byte here (pieces of a chunked reading start
  // inside it), `lines` numbers that document's lines; `skip` events are parsed but not handed on (a piece read again
  // after a failed attempt).
  Parser(std::string_view text, const char* origin, size_t user_size, const ChromeEventFn& fn, ChromeDocInfo& info,
         const LineCounter& lines, uint64_t base = 0, uint64_t skip = 0)
      : text_(text), origin_(origin), user_end_(origin + user_size), lines_(lines), base_(base), skip_(skip), fn_(fn),
        info_(info) {}

  // A middle piece of a chunked reading: a bare array of events, not the document's root.
  void events_only() { events_only_ = true; }
  uint64_t handed_on() const { return handed_on_; }
  bool stopped() const { return stopped_; }

  ChromeStatus run(od::parser& parser, size_t capacity) {
    od::document doc;
    json_doc_ = &doc;
    auto err = parser.iterate(simdjson::padded_string_view(text_.data(), text_.size(), capacity)).get(doc);
    if (err) {
      first_pass_error(err);
      return status_;
    }
    document(doc);
    return status_;
  }

  // The diagnosis reading: the user's text is element 0 of a one-element array.
  ChromeStatus run_wrapped(od::parser& parser, size_t capacity) {
    od::document doc;
    od::array wrapper;
    od::value root;
    json_doc_ = &doc;
    auto err = parser.iterate(simdjson::padded_string_view(text_.data(), text_.size(), capacity)).get(doc);
    if (!err) err = doc.get_array().get(wrapper);
    if (err) {
      first_pass_error(err);
      return status_;
    }
    bool has_root = false;
    for (auto element : wrapper) {
      if ((err = element.get(root))) return fail_iter(err), status_;
      has_root = true;
      break;
    }
    if (!has_root) return syntax("no value"), status_;
    if (!root_container(root) || stopped_) return status_;
    // Anything but the wrapper's closing bracket after the root is text after the document.
    auto where = doc.current_location();
    if (!where.error() && where.value_unsafe() < user_end_) {
      at_ = where.value_unsafe();
      syntax("unexpected characters after the JSON document");
    }
    return status_;
  }

  bool root_unclosed() const { return root_unclosed_; }

 private:
  static std::string_view token_of(od::value& v) { return v.raw_json_token(); }
  static std::string_view token_of(od::document& d) {
    auto t = d.raw_json_token();
    return t.error() ? std::string_view() : t.value_unsafe();
  }

  // ---- errors ----
  // An error while stepping through an array or object: where the iterator stands (the end: the text was cut).
  bool fail_iter(simdjson::error_code err) {
    auto where = json_doc_->current_location();
    at_ = where.error() ? user_end_ : where.value_unsafe();
    return fail_simdjson(err);
  }

  bool fail(ChromeError err, const std::string& what) {
    if (status_.ok()) {
      const char* at = std::clamp(at_, origin_, user_end_);
      status_.error = err;
      status_.offset = base_ + static_cast<uint64_t>(at - origin_);
      const uint64_t line = lines_.line_of(status_.offset);
      status_.message = std::string(chrome_error_name(err)) + ": " + what + " at byte " +
                        std::to_string(status_.offset) + " (line " + std::to_string(line) + ")";
    }
    return false;
  }
  bool syntax(const std::string& what) { return fail(ChromeError::syntax, what); }
  bool truncated(const std::string& what) {
    at_ = user_end_;
    return fail(ChromeError::truncated, what);
  }

  // The end of the user's text without trailing whitespace: an error there means the text was cut.
  const char* content_end() const {
    const char* e = user_end_;
    while (e > origin_ && is_space(e[-1])) --e;
    return e;
  }

  // An error of simdjson's second pass at the token at_ points to.
  bool fail_simdjson(simdjson::error_code err) {
    if (err == simdjson::DEPTH_ERROR) return fail(ChromeError::too_deep, "nesting too deep");
    if (err == simdjson::MEMALLOC) return fail(ChromeError::too_large, "out of memory while reading the trace");
    const char* end = content_end();
    if (at_ >= end) return truncated("input ends inside a value");
    // The token the error is in runs to the end of the text: a number or literal cut short ("12.", "nul").
    const char* tok_end = at_;
    while (tok_end < user_end_ && !is_space(*tok_end) && !std::strchr(",:[]{}\"", *tok_end)) ++tok_end;
    const std::string_view tok(at_, static_cast<size_t>(tok_end - at_));
    if (tok_end >= end && !tok.empty()) {
      for (std::string_view word : {"true", "false", "null"})
        if (tok.size() < word.size() && word.substr(0, tok.size()) == tok) return truncated("input ends inside a literal");
      if (tok.find_first_not_of("0123456789.eE+-") == std::string_view::npos) return truncated("input ends inside a number");
    }
    switch (err) {
      case simdjson::NUMBER_ERROR: return syntax("invalid number");
      case simdjson::T_ATOM_ERROR:
      case simdjson::F_ATOM_ERROR:
      case simdjson::N_ATOM_ERROR: return syntax("invalid literal");
      case simdjson::STRING_ERROR: return syntax("invalid escape in a string");
      default: break;
    }
    const char c = *at_;
    return syntax(std::string("unexpected '") + (static_cast<unsigned char>(c) >= 0x20 ? c : '?') + "' (" +
                  simdjson::error_message(err) + ")");
  }

  // Errors of simdjson's first pass (the structural index): no position from simdjson, so we find one where we can.
  void first_pass_error(simdjson::error_code err) {
    switch (err) {
      case simdjson::EMPTY:
        at_ = origin_;
        fail(ChromeError::empty, "no JSON text");
        return;
      case simdjson::CAPACITY:
        at_ = origin_;
        fail(ChromeError::too_large, "the text is larger than simdjson reads in one piece (4 GiB)");
        return;
      case simdjson::MEMALLOC:
        at_ = origin_;
        fail(ChromeError::too_large, "out of memory while indexing the trace");
        return;
      case simdjson::UNCLOSED_STRING: return unclosed_string();
      case simdjson::UTF8_ERROR:
        at_ = first_invalid_utf8();
        syntax("invalid UTF-8");
        return;
      case simdjson::UNESCAPED_CHARS: {
        at_ = origin_;
        while (at_ < user_end_ && (static_cast<unsigned char>(*at_) >= 0x20 || is_space(*at_))) ++at_;
        syntax(at_ < user_end_ ? "control character" : "control character (a raw tab or line break) inside a string");
        return;
      }
      default:
        at_ = origin_;
        syntax(simdjson::error_message(err));
    }
  }

  // An odd number of quotes: the text was cut inside a string, unless the last string would hold a line break or
  // another control character, which no string may: then a quote is missing or stray.
  void unclosed_string() {
    const char* q = user_end_;
    while (q > origin_ && q[-1] != '"') --q;
    at_ = q > origin_ ? q - 1 : origin_;
    for (const char* c = q; c < user_end_; ++c)
      if (static_cast<unsigned char>(*c) < 0x20) {
        syntax("a string is not closed (a stray or missing quote)");
        return;
      }
    truncated("input ends inside a string");
  }

  const char* first_invalid_utf8() const {
    const auto* p = reinterpret_cast<const unsigned char*>(origin_);
    const auto* e = reinterpret_cast<const unsigned char*>(user_end_);
    while (p < e) {
      const unsigned c = *p;
      const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
      if (n < 0 || e - p <= n) break;
      bool ok = true;
      for (int k = 1; k <= n; ++k) ok &= (p[k] & 0xC0) == 0x80;
      if (!ok) break;
      p += n + 1;
    }
    return reinterpret_cast<const char*>(p);
  }

  // ---- values ----
  // Where the value's text ends: after a container was walked, the next token (or the end), less whitespace.
  const char* value_end(od::value& v) {
    auto where = v.current_location();
    const char* e = where.error() ? text_.data() + text_.size() : where.value_unsafe();
    while (e > text_.data() && is_space(e[-1])) --e;
    return e;
  }

  // A scalar decoded into `out`; strings view the input when they have no escapes.
  bool scalar(od::value& v, std::string_view token, ChromeValue& out) {
    simdjson::error_code err = simdjson::SUCCESS;
    switch (token[0]) {
      case '"':
        out.type = ChromeValue::string;
        if (plain_string(token.data() + 1, out.text)) return true;
        err = v.get_string().get(out.text);
        break;
      case 't':
      case 'f': {
        bool b = false;
        err = v.get_bool().get(b);
        out.type = ChromeValue::boolean;
        out.num = b ? 1 : 0;
        out.text = b ? "true" : "false";
        break;
      }
      case 'n': {
        bool null = false;
        err = v.is_null().get(null);
        if (!err && !null) err = simdjson::N_ATOM_ERROR;
        out.type = ChromeValue::null;
        out.text = "null";
        break;
      }
      default: {
        out.type = ChromeValue::number;
        out.text = trim_right(token);
        od::number n;  // integers (most numbers in a trace) take simdjson's integer path
        err = v.get_number().get(n);
        if (!err) out.num = n.as_double();
        break;
      }
    }
    return err ? fail_simdjson(err) : true;
  }

  // Any value: scalars decoded, arrays and objects walked (validated, depth-limited) and kept as their raw text.
  bool value(od::value& v, ChromeValue& out, int depth) {
    const std::string_view token = v.raw_json_token();
    at_ = token.data();
    if (token.empty()) return fail_simdjson(simdjson::TAPE_ERROR);
    if (token[0] != '{' && token[0] != '[') return scalar(v, token, out);
    if (!walk(v, token[0], depth)) return false;
    out.type = ChromeValue::raw;
    out.text = std::string_view(token.data(), static_cast<size_t>(value_end(v) - token.data()));
    return true;
  }

  // Visits every value inside an array or object, so that simdjson validates it.
  bool walk(od::value& v, char open, int depth) {
    if (depth > kMaxDepth) return fail(ChromeError::too_deep, "nesting deeper than " + std::to_string(kMaxDepth));
    ChromeValue ignored;
    if (open == '[') {
      od::array arr;
      if (auto err = v.get_array().get(arr)) return fail_iter(err);
      for (auto element : arr) {
        od::value item;
        if (auto err = element.get(item)) return fail_iter(err);
        if (!value(item, ignored, depth + 1)) return false;
      }
      return true;
    }
    od::object obj;
    if (auto err = v.get_object().get(obj)) return fail_iter(err);
    for (auto member : obj) {
      if (auto err = member.error()) return fail_iter(err);
      od::field& f = member.value_unsafe();  // in place: a copy of the field stalls on store forwarding
      std::string_view key;
      if (!key_of(f, key)) return false;
      if (!value(f.value(), ignored, depth + 1)) return false;
    }
    return true;
  }

  // A member's name: a view of the input when it has no escapes, else unescaped by simdjson.
  bool key_of(od::field& f, std::string_view& key) {
    const char* k = f.key().raw();
    at_ = k - 1;
    if (plain_string(k, key)) return true;
    if (auto err = f.unescaped_key().get(key)) return fail_simdjson(err);
    return true;
  }

  // ---- events ----
  bool time_value(od::value& v, bool& has, int64_t& ns) {
    // Plain decimals ("5262983760744.466", nearly every timestamp) are converted exactly from their text, which also
    // checks them; anything else goes through simdjson's number parser.
    const std::string_view token = trim_right(v.raw_json_token());
    at_ = token.data();
    if (chrome_json::plain_micros_to_ns(token, ns)) {
      has = true;
      return true;
    }
    ChromeValue t;
    if (!value(v, t, 4)) return false;
    if (t.type == ChromeValue::number) {
      has = true;
      ns = micros_text_to_ns(t.text, t.num);
    } else if (t.type == ChromeValue::string && !t.text.empty()) {
      double d = 0;
      auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), d);
      if (r.ec == std::errc() && r.ptr == t.text.data() + t.text.size()) {
        has = true;
        ns = micros_text_to_ns(t.text, d);
      }
    }
    return true;
  }

  bool args(od::value& v, size_t& nargs) {
    od::object obj;
    if (auto err = v.get_object().get(obj)) return fail_iter(err);
    for (auto member : obj) {
      if (auto err = member.error()) return fail_iter(err);
      od::field& f = member.value_unsafe();  // in place: a copy of the field stalls on store forwarding
      // Written in place, for the same reason as string_member; past kMaxArgs into a slot that is not kept.
      ChromeArg& arg = nargs < kMaxArgs ? args_[nargs] : spare_arg_;
      if (!key_of(f, arg.key)) return false;
      arg.value = ChromeValue{};
      if (!value(f.value(), arg.value, 5)) return false;
      if (nargs < kMaxArgs) ++nargs;
    }
    return true;
  }

  // "name", "cat", "ph": a string (or a number's text) written straight into `out` (copying a just-written view
  // through a temporary stalls the CPU's store forwarding, at this rate a fifth of the time).
  bool string_member(od::value& v, std::string_view& out) {
    const std::string_view token = v.raw_json_token();
    at_ = token.data();
    if (!token.empty() && token[0] == '"' && plain_string(token.data() + 1, out)) return true;
    ChromeValue val;
    if (!value(v, val, 4)) return false;
    if (val.type == ChromeValue::string || val.type == ChromeValue::number) out = val.text;
    return true;
  }

  bool event_member(std::string_view key, od::value& v, ChromeEventView& ev, size_t& nargs) {
    ChromeValue val;
    switch (key.size()) {
      case 1:
        if (key == "s") {  // an instant's scope
          if (!value(v, val, 4)) return false;
          if (val.type == ChromeValue::string) ev.scope = val.text;
          return true;
        }
        break;
      case 2:
        if (key == "id") return value(v, ev.id, 4);
        if (key == "bp") {  // a flow end's binding point
          if (!value(v, val, 4)) return false;
          if (val.type == ChromeValue::string) ev.bp = val.text;
          return true;
        }
        if (key == "ph") {
          std::string_view ph;
          if (!string_member(v, ph)) return false;
          if (!ph.empty()) ev.ph = ph[0];
          return true;
        }
        if (key == "ts") return time_value(v, ev.has_ts, ev.ts_ns);
        break;
      case 3:
        if (key == "pid") return value(v, ev.pid, 4);
        if (key == "tid") return value(v, ev.tid, 4);
        if (key == "dur") return time_value(v, ev.has_dur, ev.dur_ns);
        if (key == "cat") return string_member(v, ev.cat);
        break;
      case 4:
        if (key == "name") return string_member(v, ev.name);
        if (key == "args") {
          const std::string_view token = v.raw_json_token();
          at_ = token.data();
          if (!token.empty() && token[0] == '{') return args(v, nargs);
        }
        break;
      default: break;
    }
    return value(v, val, 4);
  }

  bool event(od::value& v) {
    od::object obj;
    if (auto err = v.get_object().get(obj)) return fail_iter(err);
    ChromeEventView ev;
    size_t nargs = 0;
    for (auto member : obj) {
      if (auto err = member.error()) return fail_iter(err);
      od::field& f = member.value_unsafe();  // in place: a copy of the field stalls on store forwarding
      std::string_view key;
      if (!key_of(f, key)) return false;
      if (!event_member(key, f.value(), ev, nargs)) return false;
    }
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    ev.args = args_.data();
    ev.arg_count = nargs;
    ++info_.events;
    ++handed_on_;
    if (fn_ && !fn_(ev)) stopped_ = true;
    return true;
  }

  template <class Container>
  bool events_array(Container& c) {
    od::array arr;
    const bool root = opening_root_;
    opening_root_ = false;
    if (auto err = c.get_array().get(arr)) return root ? root_error(err) : fail_iter(err);
    for (auto element : arr) {
      if (auto err = element.error()) return fail_iter(err);
      od::value& item = element.value_unsafe();
      const std::string_view token = item.raw_json_token();
      at_ = token.data();
      if (!token.empty() && token[0] == '{') {
        if (!event(item)) return false;
        if (stopped_) return true;
      } else {
        ChromeValue ignored;
        if (!value(item, ignored, 3)) return false;
      }
    }
    return true;
  }

  // ---- the document ----
  // simdjson checks up front that the root's last character closes it; when it does not, the text is re-read
  // wrapped (parse_chrome_json) to say why.
  bool root_error(simdjson::error_code err) {
    if (err == simdjson::INCOMPLETE_ARRAY_OR_OBJECT) {
      root_unclosed_ = true;
      return truncated("the document ends before its closing bracket");
    }
    return fail_simdjson(err);
  }

  // A top-level member other than the events: kept as JSON when small.
  bool top_member(std::string_view key, od::value& v) {
    const std::string_view token = trim_right(v.raw_json_token());
    ChromeValue val;
    if (!value(v, val, 2)) return false;
    const std::string_view raw = val.type == ChromeValue::raw ? val.text : token;  // a string with its quotes
    if (raw.size() > kMaxTopLevelValue) return true;
    nlohmann::json j = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) info_.top[std::string(key)] = std::move(j);
    return true;
  }

  template <class Container>
  bool trace_object(Container& c) {
    od::object obj;
    const bool root = opening_root_;
    opening_root_ = false;
    if (auto err = c.get_object().get(obj)) return root ? root_error(err) : fail_iter(err);
    bool seen_events = false;
    for (auto member : obj) {
      if (auto err = member.error()) return fail_iter(err);
      od::field& f = member.value_unsafe();  // in place: a copy of the field stalls on store forwarding
      std::string_view key;
      if (!key_of(f, key)) return false;
      od::value v = f.value();
      const std::string_view token = v.raw_json_token();
      at_ = token.data();
      if (key == "traceEvents" && !token.empty() && token[0] == '[') {
        seen_events = true;
        if (!events_array(v) || stopped_) return false;
      } else if (!top_member(key, v)) {
        return false;
      }
    }
    if (!seen_events) {
      at_ = origin_;
      return fail(ChromeError::not_a_trace, "the JSON object has no \"traceEvents\" array");
    }
    return true;
  }

  // The root when it is an array or an object; false when it failed or the callback stopped the reading.
  template <class Root>
  bool root_container(Root& r) {
    const std::string_view token = trim_right(token_of(r));
    at_ = token.data();
    if (token.empty()) return fail_simdjson(simdjson::TAPE_ERROR);
    opening_root_ = true;
    if (token[0] == '[') {
      if (!events_only_) info_.array_format = true;
      return events_array(r) && !stopped_;
    }
    if (token[0] == '{') return trace_object(r) && !stopped_;
    return root_scalar(r, token);
  }

  template <class Root>
  bool root_scalar(Root& r, std::string_view token) {
    simdjson::error_code err = simdjson::SUCCESS;
    if (token[0] == '"') {
      std::string_view s;
      err = r.get_string().get(s);
    } else if (token[0] == 't' || token[0] == 'f') {
      bool b = false;
      err = r.get_bool().get(b);
    } else if (token[0] == 'n') {
      bool null = false;
      err = r.is_null().get(null);
      if (!err && !null) err = simdjson::N_ATOM_ERROR;
    } else {
      double d = 0;
      err = r.get_double().get(d);
    }
    if (err) return fail_simdjson(err);
    return fail(ChromeError::not_a_trace, "the JSON document is a scalar, not a trace");
  }

  void document(od::document& doc) {
    auto first = doc.raw_json_token();
    if (first.error()) {
      at_ = origin_;
      fail_simdjson(first.error());
      return;
    }
    if (!root_container(doc)) return;
    auto where = doc.current_location();
    if (!where.error()) {
      at_ = where.value_unsafe();
      syntax("unexpected characters after the JSON document");
    }
  }

  std::string_view text_;
  const char* origin_;
  const char* user_end_;
  const LineCounter& lines_;
  uint64_t base_ = 0;
  uint64_t skip_ = 0;
  uint64_t handed_on_ = 0;
  bool events_only_ = false;
  const ChromeEventFn& fn_;
  ChromeDocInfo& info_;
  ChromeStatus status_;
  od::document* json_doc_ = nullptr;
  const char* at_ = origin_;  // the token being read: where an error is reported
  bool opening_root_ = false;  // the next container opened is the root (simdjson checks it is closed)
  bool stopped_ = false;
  bool root_unclosed_ = false;
  std::array<ChromeArg, kMaxArgs> args_{};
  ChromeArg spare_arg_;
};

bool only_whitespace(std::string_view s) {
  return std::all_of(s.begin(), s.end(), is_space);
}

// Small texts reuse their thread's parser (its buffers stay paged in); a big one gets its own, freed after, so that
// no thread keeps gigabytes of index.
od::parser& parser_for(size_t bytes, od::parser& own) {
  thread_local od::parser reused;
  return bytes <= kMaxReusedParserBytes ? reused : own;
}

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
    std::vector<char> block(kBlock);
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
    if (size_read() > kMaxChromeJsonBytes) {
      eof_ = true;
      error_ = make_chrome_error(ChromeError::too_large, path_ + " is larger than 8 GiB");
    }
  }

  std::FILE* f_;
  std::string path_;
  std::string buf_;     // the window: file bytes [buf_at_ - start_, buf_at_ - start_ + buf_.size())
  size_t start_ = 0;    // where byte buf_at_ is in buf_
  uint64_t buf_at_ = 0;
  bool eof_ = false;
  ChromeStatus error_;
};

// A root that is not closed: cut short, or a syntax error, or nesting too deep before the end. The text is read again
// as the only element of an array, which simdjson accepts, and the error found there is the answer. `text` holds the
// user's bytes [user, user + size), which are at `base` in the document `lines` counts.
ChromeStatus diagnose_unclosed_root(std::string_view text, size_t user, size_t size, const LineCounter& lines,
                                    uint64_t base) {
  std::string wrapped;
  wrapped.reserve(text.size() + 2 + simdjson::SIMDJSON_PADDING);
  wrapped.push_back('[');
  wrapped.append(text);
  wrapped.push_back(']');
  wrapped.append(simdjson::SIMDJSON_PADDING, '\0');
  ChromeDocInfo scratch;
  const ChromeEventFn no_callback;  // the Parser keeps a reference: not a temporary
  od::parser parser;
  Parser p(std::string_view(wrapped.data(), text.size() + 2), wrapped.data() + 1 + user, size, no_callback, scratch,
           lines, base);
  ChromeStatus s = p.run_wrapped(parser, wrapped.size());
  if (s.ok()) s = make_chrome_error(ChromeError::truncated, "the document ends before its closing bracket");
  return s;
}

// One reading of `text` (padded to `capacity`) whose user bytes are [user, user + size) of it, at `base` in the
// document `lines` counts.
struct Reading {
  ChromeStatus status;
  uint64_t handed_on = 0;
  bool stopped = false;
};
Reading read_text(std::string_view text, size_t capacity, size_t user, size_t size, const LineCounter& lines,
                  uint64_t base, uint64_t skip, bool events_only, const ChromeEventFn& on_event,
                  ChromeDocInfo& info) {
  od::parser own;
  od::parser& parser = parser_for(text.size(), own);
  Parser p(text, text.data() + user, size, on_event, info, lines, base, skip);
  if (events_only) p.events_only();
  Reading r;
  r.status = p.run(parser, capacity);
  r.handed_on = p.handed_on();
  r.stopped = p.stopped();
  // Events already handed to the callback stay handed; the diagnosis only names the error.
  if (p.root_unclosed() && text.size() <= kMaxDiagnosedBytes) {
    ChromeStatus why = diagnose_unclosed_root(text, user, size, lines, base);
    if (why.error != ChromeError::none) r.status = why;
  }
  return r;
}

// A piece of the document read on its own: `prefix` + `body` (at `at` in the document) + `suffix`, copied into `buf`
// with padding.
Reading read_piece(const DocText& doc, uint64_t at, std::string_view body, std::string_view prefix,
                   std::string_view suffix, uint64_t skip, bool events_only, std::string& buf,
                   const ChromeEventFn& on_event, ChromeDocInfo& info) {
  buf.clear();
  buf.append(prefix);
  buf.append(body);
  buf.append(suffix);
  const size_t n = buf.size();
  buf.append(simdjson::SIMDJSON_PADDING, '\0');
  return read_text(std::string_view(buf.data(), n), buf.size(), prefix.size(), body.size(), doc, at, skip,
                   events_only, on_event, info);
}

// ---- chunked reading ----
// A big document read whole makes simdjson index all of it first and then read it again from memory; read in pieces
// of about 64 KiB, each piece's index and text stay in the cache. Pieces are cut only between two events where a
// line break separates them ("},\n{": no JSON string holds a raw line break, so the cut is never inside one). A cut
// that falls between two objects nested deeper than the events leaves a piece that does not parse: it is read again
// twice as long, skipping the events it already handed on.
constexpr size_t kPieceBytes = 64u << 10;
constexpr size_t kMaxCutSearch = 4u << 20;
constexpr size_t kMaxPieceBytes = 16u << 20;
constexpr size_t kMaxHeadBytes = 1u << 20;
constexpr std::string_view kEventsKey = "\"traceEvents\"";
constexpr std::string_view kLastPiecePrefix = "{\"traceEvents\":[";
constexpr size_t kNoCut = std::string_view::npos;

// Where the events array's contents start (after its '['): the root array's, or the "traceEvents" member's when it
// comes within the first megabyte. npos when neither.
size_t events_start(std::string_view head, bool& object_root) {
  size_t i = 0;
  while (i < head.size() && is_space(head[i])) ++i;
  if (i == head.size()) return kNoCut;
  object_root = head[i] == '{';
  if (head[i] == '[') return i + 1;
  if (!object_root) return kNoCut;
  const size_t key = head.substr(0, kMaxHeadBytes).find(kEventsKey);
  if (key == std::string_view::npos) return kNoCut;
  i = key + kEventsKey.size();
  while (i < head.size() && is_space(head[i])) ++i;
  if (i == head.size() || head[i] != ':') return kNoCut;
  ++i;
  while (i < head.size() && is_space(head[i])) ++i;
  return i < head.size() && head[i] == '[' ? i + 1 : kNoCut;
}

// In `w` (the document from offset `at`), the comma of the first "}" ws "," ws "{" with a line break in its
// whitespace at or after w[from]: its offset in the document, or kNoCut.
uint64_t next_cut(std::string_view w, uint64_t at, size_t from) {
  for (size_t nl = from; nl < w.size(); ++nl) {
    const char* p = static_cast<const char*>(std::memchr(w.data() + nl, '\n', w.size() - nl));
    if (!p) return kNoCut;
    nl = static_cast<size_t>(p - w.data());
    size_t b = nl;
    while (b > from && is_space(w[b - 1])) --b;
    if (b <= from + 1 || w[b - 1] != ',') continue;
    const size_t comma = b - 1;
    b = comma;
    while (b > from && is_space(w[b - 1])) --b;
    if (b == from || w[b - 1] != '}') continue;
    size_t f = nl + 1;
    while (f < w.size() && is_space(w[f])) ++f;
    if (f < w.size() && w[f] == '{') return at + comma;
  }
  return kNoCut;
}

// The cut ending a piece that starts at `at` and is at least `min_size` long.
uint64_t cut_after(DocText& doc, uint64_t at, size_t min_size) {
  return next_cut(doc.bytes(at, min_size + kMaxCutSearch), at, min_size);
}

// The members after the events join those before them; the last piece's count of events is the total.
void merge_tail(ChromeDocInfo& info, ChromeDocInfo& tail) {
  for (auto it = tail.top.begin(); it != tail.top.end(); ++it) info.top[it.key()] = std::move(it.value());
  info.events = tail.events;
}

// Reads the document in pieces; false in `used` when its beginning does not allow it (then nothing was handed on).
ChromeStatus parse_chunked(DocText& doc, const ChromeEventFn& on_event, ChromeDocInfo& info, bool& used) {
  used = false;
  bool object_root = false;
  const std::string_view head = doc.bytes(0, kMaxHeadBytes + 64);
  const size_t start = events_start(head, object_root);
  if (start == kNoCut) return {};
  std::string buf;
  buf.reserve(kPieceBytes + kMaxCutSearch + kLastPiecePrefix.size() + 2 + simdjson::SIMDJSON_PADDING);
  if (object_root) {
    // The members before the events, read on their own as an object with an empty "traceEvents".
    ChromeDocInfo members;
    Reading r = read_piece(doc, 0, head.substr(0, start), "", "]}", 0, false, buf, nullptr, members);
    if (!r.status.ok()) return {};
    info.top = std::move(members.top);
  } else {
    info.array_format = true;
  }
  used = true;
  uint64_t at = start;
  uint64_t skip = 0;  // events of a failed attempt at this piece, already handed on
  for (;;) {
    uint64_t cut = cut_after(doc, at, kPieceBytes);
    Reading r;
    // A piece that does not parse (a cut inside an event, or damage) is tried again, twice as long, until it grows
    // past kMaxPieceBytes; the rest is then read as the last piece, which names the damage.
    while (cut != kNoCut) {
      r = read_piece(doc, at, doc.bytes(at, cut - at), "[", "]", skip, true, buf, on_event, info);
      if (r.stopped) return {};
      skip += r.handed_on;
      if (r.status.ok() || cut - at > kMaxPieceBytes) break;
      cut = cut_after(doc, at, 2 * (cut - at));  // a damaged piece costs a few readings, not one per event
    }
    if (cut == kNoCut || !r.status.ok()) break;
    at = cut + 1;
    skip = 0;
  }
  // The last events, the end of the array and the members after it.
  ChromeDocInfo tail;
  tail.events = info.events;
  const std::string_view rest = doc.rest(at);
  if (!doc.read_error().ok()) return doc.read_error();
  Reading r = read_piece(doc, at, rest, object_root ? kLastPiecePrefix : "[", "", skip, false, buf, on_event, tail);
  merge_tail(info, tail);
  return r.status;
}

// The document read in pieces (which are copied, so `json` needs no padding) when it is big enough and can be cut;
// false in `done` otherwise.
ChromeStatus parse_in_pieces(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info, bool& done) {
  done = false;
  if (json.size() <= kPieceBytes * 2) return {};
  MemoryText doc(json);
  return parse_chunked(doc, on_event, info, done);
}

// The document read whole; `json` is followed by readable padding up to `capacity`.
ChromeStatus parse_whole(std::string_view json, size_t capacity, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  if (only_whitespace(json)) return make_chrome_error(ChromeError::empty, "no JSON text at byte 0 (line 1)");
  if (json.size() > simdjson::SIMDJSON_MAXSIZE_BYTES - simdjson::SIMDJSON_PADDING)
    return make_chrome_error(ChromeError::too_large, "the JSON text is larger than 4 GiB, the most simdjson indexes");
  const MemoryText lines(json);
  return read_text(json, capacity, 0, json.size(), lines, 0, 0, false, on_event, info).status;
}

bool starts_as_gzip(std::FILE* f) {
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::rewind(f);
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace

ChromeStatus parse_chrome_file(const std::string& path, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  try {
    std::error_code ec;
    std::unique_ptr<FILE, int (*)(FILE*)> f(
        std::filesystem::is_directory(path, ec) ? nullptr : std::fopen(path.c_str(), "rb"), &std::fclose);
    // gzip is inflated whole (libdeflate needs it so); so is a file that cannot be opened, for read_chrome_bytes's
    // errors.
    if (f && !starts_as_gzip(f.get())) {
      FileText doc(f.get(), path);
      bool done = false;
      ChromeStatus s = parse_chunked(doc, on_event, info, done);
      if (done) return s;
      if (!doc.read_error().ok()) return doc.read_error();
    }
    std::string text;
    ChromeStatus s = read_chrome_bytes(path, text);
    if (!s.ok()) return s;
    info = ChromeDocInfo{};
    return parse_chrome_json(text, on_event, info);
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading " + path);
  }
}

ChromeStatus parse_chrome_json(const std::string& json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  if (json.capacity() < json.size() + simdjson::SIMDJSON_PADDING)
    return parse_chrome_json(std::string_view(json), on_event, info);
  try {
    bool done = false;
    ChromeStatus s = parse_in_pieces(json, on_event, info, done);
    return done ? s : parse_whole(json, json.capacity(), on_event, info);
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
}

ChromeStatus parse_chrome_json(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  try {
    bool done = false;
    ChromeStatus s = parse_in_pieces(json, on_event, info, done);
    if (done) return s;
    // simdjson reads up to 64 bytes past the end of the text: a copy with that padding.
    std::string padded;
    padded.reserve(json.size() + simdjson::SIMDJSON_PADDING);
    padded.assign(json);
    padded.append(simdjson::SIMDJSON_PADDING, '\0');
    padded.resize(json.size());
    return parse_whole(padded, padded.capacity(), on_event, info);
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
}

}  // namespace ddp
