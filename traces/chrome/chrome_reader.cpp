// The Chrome reader's entry points: errors, argument lookup, and the owned copy of a trace for tools and tests. The
// parser is in chrome_parser.cpp, file and gzip input in chrome_input.cpp.
#include "traces/chrome/chrome_reader.h"

#include <new>

#include "traces/chrome/chrome_status.h"

namespace ddp {

std::string_view chrome_error_name(ChromeError e) {
  switch (e) {
    case ChromeError::none:
      return "ok";
    case ChromeError::cannot_open:
      return "cannot open";
    case ChromeError::decompress:
      return "bad gzip data";
    case ChromeError::empty:
      return "empty input";
    case ChromeError::truncated:
      return "truncated JSON";
    case ChromeError::syntax:
      return "malformed JSON";
    case ChromeError::too_deep:
      return "JSON nested too deeply";
    case ChromeError::not_a_trace:
      return "not a Chrome trace";
    case ChromeError::too_large:
      return "input too large";
  }
  return "unknown error";
}

ChromeStatus make_chrome_error(ChromeError e, std::string msg) {
  ChromeStatus s;
  s.error = e;
  s.message = std::string(chrome_error_name(e)) + ": " + std::move(msg);
  return s;
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

namespace {

// The callback that keeps an owned copy of every event.
ChromeEventFn copy_into(ChromeTrace& t) {
  return [&t](const ChromeEventView& v) {
    ChromeEvent e;
    e.ph = v.ph;
    e.name = v.name;
    e.cat = v.cat;
    e.pid = v.pid.text;
    e.tid = v.tid.text;
    e.id = v.id.text;
    e.bp = v.bp;
    e.scope = v.scope;
    e.has_ts = v.has_ts;
    e.has_dur = v.has_dur;
    e.ts_ns = v.ts_ns;
    e.dur_ns = v.dur_ns;
    for (size_t i = 0; i < v.arg_count; ++i) e.args.emplace_back(v.args[i].key, v.args[i].value.text);
    t.events.push_back(std::move(e));
    return true;
  };
}

}  // namespace

bool chrome_error_names_file(ChromeError e) { return e == ChromeError::cannot_open || e == ChromeError::decompress; }

ChromeTrace read_chrome_text(std::string_view json) {
  ChromeTrace t;
  try {
    t.status = parse_chrome_json(json, copy_into(t), t.info);
  } catch (const std::bad_alloc&) {
    t.status = make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
  return t;
}

ChromeTrace read_chrome_file(const std::string& path) {
  ChromeTrace t;
  try {
    t.status = parse_chrome_file(path, copy_into(t), t.info);
  } catch (const std::bad_alloc&) {
    t.status = make_chrome_error(ChromeError::too_large, "out of memory while reading the trace");
  }
  if (!t.status.ok() && !chrome_error_names_file(t.status.error)) t.status.message = path + ": " + t.status.message;
  return t;
}

}  // namespace ddp
