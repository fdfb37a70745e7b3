// The parser behind parse_chrome_json and parse_chrome_file: simdjson's On-Demand API (its first pass indexes the
// structure with SIMD, then we pull each event's fields in file order), every event handed to the callback as views
// into the text or into simdjson's string buffer (strings with escapes), no DOM. Big texts and files are read in
// pieces cut between events ("chunked reading" below).
//
// On-Demand validates what it is asked for, so every value of an event and of the top level is visited (nested
// values too, with our own depth limit, since On-Demand has none). Its errors say what but rarely where: the parser
// remembers the token it was reading (chrome_parse_errors.h). The pieces of a big document are cut in
// chrome_pieces.cpp, files are opened in chrome_input.cpp.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <vector>

#include "traces/base/read_progress.h"
#include "traces/chrome/chrome_json_text.h"
#include "traces/chrome/chrome_lenient.h"
#include "traces/chrome/chrome_parse_errors.h"
#include "traces/chrome/chrome_pieces.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/chrome/chrome_status.h"
#include "traces/chrome/chrome_text.h"

namespace ddp {
namespace {

namespace od = simdjson::ondemand;
using namespace chrome_parse;  // the reader's internal pieces: errors, texts, the chunked reading
using chrome_json::micros_text_to_ns;
using chrome_json::plain_string;
using chrome_json::trim_right;

constexpr int kMaxDepth = 256;
constexpr size_t kMaxArgs = 32;
constexpr size_t kMaxTopLevelValue = 4u << 20;
// A document whose root is not closed is re-read inside a wrapper to tell truncation from a syntax error or too deep
// nesting; above this size it is called truncated without that second reading (a cut file is by far the likelier).
constexpr size_t kMaxDiagnosedBytes = 64u << 20;
constexpr size_t kMaxReusedParserBytes = 64u << 20;

class Parser {
 public:
  // `text` is the JSON inside `buf`, which stays readable for simdjson's padding after it; `origin` is where byte 0
  // of the user's text is (the wrapper of the diagnosis reading adds one byte in front).
  // `base` is the offset in the whole document of the user text's first byte here (pieces of a chunked reading start
  // inside it), `lines` numbers that document's lines; `skip` events are parsed but not handed on (a piece read again
  // after a failed attempt).
  Parser(std::string_view text, const char* origin, size_t user_size, const ChromeEventFn& fn, ChromeDocInfo& info,
         const LineCounter& lines, uint64_t base = 0, uint64_t skip = 0)
      : text_(text),
        origin_(origin),
        user_end_(origin + user_size),
        lines_(lines),
        base_(base),
        skip_(skip),
        fn_(fn),
        info_(info),
        err_(origin, origin + user_size, lines, base) {}

  // A middle piece of a chunked reading: a bare array of events, not the document's root.
  void events_only() { events_only_ = true; }
  uint64_t handed_on() const { return handed_on_; }
  bool stopped() const { return stopped_; }

  ChromeStatus run(od::parser& parser, size_t capacity) {
    od::document doc;
    json_doc_ = &doc;
    auto err = parser.iterate(simdjson::padded_string_view(text_.data(), text_.size(), capacity)).get(doc);
    if (err) {
      err_.first_pass_error(err);
      return err_.status;
    }
    document(doc);
    return err_.status;
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
      err_.first_pass_error(err);
      return err_.status;
    }
    bool has_root = false;
    for (auto element : wrapper) {
      if ((err = element.get(root))) return fail_iter(err), err_.status;
      has_root = true;
      break;
    }
    if (!has_root) return err_.syntax("no value"), err_.status;
    if (!root_container(root) || stopped_) return err_.status;
    // Anything but the wrapper's closing bracket after the root is text after the document.
    auto where = doc.current_location();
    if (!where.error() && where.value_unsafe() < user_end_) {
      err_.at = where.value_unsafe();
      err_.syntax("unexpected characters after the JSON document");
    }
    return err_.status;
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
    err_.at = where.error() ? user_end_ : where.value_unsafe();
    return err_.fail_simdjson(err);
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
    return err ? err_.fail_simdjson(err) : true;
  }

  // Any value: scalars decoded, arrays and objects walked (validated, depth-limited) and kept as their raw text.
  bool value(od::value& v, ChromeValue& out, int depth) {
    const std::string_view token = v.raw_json_token();
    err_.at = token.data();
    if (token.empty()) return err_.fail_simdjson(simdjson::TAPE_ERROR);
    if (token[0] != '{' && token[0] != '[') return scalar(v, token, out);
    if (!walk(v, token[0], depth)) return false;
    out.type = ChromeValue::raw;
    out.text = std::string_view(token.data(), static_cast<size_t>(value_end(v) - token.data()));
    return true;
  }

  // Visits every value inside an array or object, so that simdjson validates it.
  bool walk(od::value& v, char open, int depth) {
    if (depth > kMaxDepth) return err_.fail(ChromeError::too_deep, "nesting deeper than " + std::to_string(kMaxDepth));
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
    err_.at = k - 1;
    if (plain_string(k, key)) return true;
    if (auto err = f.unescaped_key().get(key)) return err_.fail_simdjson(err);
    return true;
  }

  // ---- events ----
  bool time_value(od::value& v, bool& has, int64_t& ns) {
    // Plain decimals ("5262983760744.466", nearly every timestamp) are converted exactly from their text, which also
    // checks them; anything else goes through simdjson's number parser.
    const std::string_view token = trim_right(v.raw_json_token());
    err_.at = token.data();
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
    err_.at = token.data();
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
          err_.at = token.data();
          if (!token.empty() && token[0] == '{') return args(v, nargs);
        }
        break;
      default:
        break;
    }
    return value(v, val, 4);
  }

  // `start` is the event's first byte ('{'): where the event's text starts in the document.
  bool event(od::value& v, const char* start) {
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
    ev.offset = base_ + static_cast<uint64_t>(start - origin_);
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
      err_.at = token.data();
      if (!token.empty() && token[0] == '{') {
        if (!event(item, token.data())) return false;
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
      return err_.truncated("the document ends before its closing bracket");
    }
    return err_.fail_simdjson(err);
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
      err_.at = token.data();
      if (key == "traceEvents" && !token.empty() && token[0] == '[') {
        seen_events = true;
        if (!events_array(v) || stopped_) return false;
      } else if (!top_member(key, v)) {
        return false;
      }
    }
    if (!seen_events) {
      err_.at = origin_;
      return err_.fail(ChromeError::not_a_trace, "the JSON object has no \"traceEvents\" array");
    }
    return true;
  }

  // The root when it is an array or an object; false when it failed or the callback stopped the reading.
  template <class Root>
  bool root_container(Root& r) {
    const std::string_view token = trim_right(token_of(r));
    err_.at = token.data();
    if (token.empty()) return err_.fail_simdjson(simdjson::TAPE_ERROR);
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
    if (err) return err_.fail_simdjson(err);
    return err_.fail(ChromeError::not_a_trace, "the JSON document is a scalar, not a trace");
  }

  void document(od::document& doc) {
    auto first = doc.raw_json_token();
    if (first.error()) {
      err_.at = origin_;
      err_.fail_simdjson(first.error());
      return;
    }
    if (!root_container(doc)) return;
    auto where = doc.current_location();
    if (!where.error()) {
      err_.at = where.value_unsafe();
      err_.syntax("unexpected characters after the JSON document");
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
  od::document* json_doc_ = nullptr;
  bool opening_root_ = false;  // the next container opened is the root (simdjson checks it is closed)
  bool stopped_ = false;
  bool root_unclosed_ = false;
  std::array<ChromeArg, kMaxArgs> args_{};
  ChromeArg spare_arg_;
  chrome_parse::ErrorSite err_;  // where an error is and what it says (chrome_parse_errors.h)
};

bool only_whitespace(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

// Small texts reuse their thread's parser (its buffers stay paged in); a big one gets its own, freed after, so that
// no thread keeps gigabytes of index.
od::parser& parser_for(size_t bytes, od::parser& own) {
  thread_local od::parser reused;
  return bytes <= kMaxReusedParserBytes ? reused : own;
}

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

// The document read whole; `json` is followed by readable padding up to `capacity`.
ChromeStatus parse_whole(std::string_view json, size_t capacity, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  if (only_whitespace(json)) return make_chrome_error(ChromeError::empty, "no JSON text at byte 0 (line 1)");
  if (json.size() > simdjson::SIMDJSON_MAXSIZE_BYTES - simdjson::SIMDJSON_PADDING)
    return make_chrome_error(ChromeError::too_large, "the JSON text is larger than 4 GiB, the most simdjson indexes");
  const MemoryText lines(json);
  return read_text(json, capacity, 0, json.size(), lines, 0, 0, false, on_event, info).status;
}

}  // namespace

namespace chrome_parse {
Reading read_text(std::string_view text, size_t capacity, size_t user, size_t size, const LineCounter& lines,
                  uint64_t base, uint64_t skip, bool events_only, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  od::parser own;
  od::parser& parser = parser_for(text.size(), own);
  info.largest_piece = std::max<uint64_t>(info.largest_piece, size);
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
}  // namespace chrome_parse

ChromeStatus chrome_parse::parse_json_strict(const std::string& json, const ChromeEventFn& on_event,
                                             ChromeDocInfo& info) {
  if (json.capacity() < json.size() + simdjson::SIMDJSON_PADDING)
    return parse_json_strict(std::string_view(json), on_event, info);
  try {
    bool done = false;
    ChromeStatus s = parse_in_pieces(json, on_event, info, done);
    if (done) return s;
    s = parse_whole(json, json.capacity(), on_event, info);
    trace_read_progress().advance(json.size());  // the pieces report as they go; a text read whole, at its end
    return s;
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
}

ChromeStatus chrome_parse::parse_json_strict(std::string_view json, const ChromeEventFn& on_event,
                                             ChromeDocInfo& info) {
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
    s = parse_whole(padded, padded.capacity(), on_event, info);
    trace_read_progress().advance(json.size());
    return s;
  } catch (const std::bad_alloc&) {
    return make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
}

}  // namespace ddp
