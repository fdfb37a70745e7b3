#include "traces/chrome/chrome_lenient.h"

#include <utility>
#include <vector>

namespace ddp {
namespace chrome_parse {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string make_strict(std::string& text, bool* closed) {
  if (closed) *closed = false;
  std::vector<char> stack;
  size_t comma = std::string::npos;  // a comma with only whitespace after it so far
  size_t commas = 0, first_comma = 0;
  size_t events_depth = 0;  // the stack size inside the events array: 1 (array format) or 2 ("traceEvents")
  size_t last_event_end = 0;
  bool in_string = false;
  char prev = 0;  // the last character outside strings and whitespace: a trailing comma follows a value
  size_t key_start = 0;
  std::string_view last_key;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"') {
        in_string = false;
        if (stack.size() == 1) last_key = std::string_view(text).substr(key_start, i - key_start);
      }
      continue;
    }
    if (is_space(c)) continue;
    const char before = prev;
    prev = c;
    if ((c == '}' || c == ']') && comma != std::string::npos) {
      if (commas++ == 0) first_comma = comma;
      text[comma] = ' ';
    }
    comma = std::string::npos;
    switch (c) {
      case '"':
        in_string = true;
        key_start = i + 1;
        break;
      case ',':
        if (before != '[' && before != '{' && before != ',' && before != ':') comma = i;
        break;
      case '[':
        if (stack.empty())
          events_depth = 1;
        else if (stack.size() == 1 && stack[0] == '{' && last_key == "traceEvents")
          events_depth = 2;
        stack.push_back(c);
        break;
      case '{':
        stack.push_back(c);
        break;
      case '}':
      case ']':
        if (stack.empty()) return {};  // damaged some other way: the strict error stands
        stack.pop_back();
        if (c == '}' && events_depth > 0 && stack.size() == events_depth) last_event_end = i + 1;
        if (events_depth > 0 && stack.size() < events_depth) events_depth = 0;  // the events array closed
        break;
      default:
        break;
    }
  }
  std::string note;
  if (commas > 0)
    note = plural(commas, "trailing comma", "trailing commas") + " (the first at byte " + std::to_string(first_comma) +
           ")";
  if (!stack.empty()) {
    // Only the JSON Array Format, as Perfetto: a cut "traceEvents" document stays truncated, which the Kineto importer
    // reads up to the cut itself (dropping the step the cut fell in, and saying so).
    if (events_depth != 1 || last_event_end == 0) return {};
    const size_t dropped = text.size() - last_event_end;
    text.resize(last_event_end);
    text += "]";
    if (closed) *closed = true;
    if (!note.empty()) note += "; ";
    note +=
        "the events array is not closed (a writer that stopped mid-trace?): read up to its last whole event, "
        "which ends at byte " +
        std::to_string(last_event_end) +
        (dropped > 0 ? ", " + plural(dropped, "byte", "bytes") + " after it dropped" : std::string());
  }
  if (note.empty()) return {};
  return "not strictly JSON, read as Perfetto reads it: " + note;
}

namespace {

bool worth_retrying(const ChromeStatus& s) {
  return s.error == ChromeError::syntax || s.error == ChromeError::truncated;
}

// The strict reading failed after handing `delivered` events on: the strict text is read again, those events skipped.
ChromeStatus read_again(std::string& text, const std::string& note, bool closed, uint64_t delivered,
                        const ChromeEventFn& on_event, ChromeDocInfo& info, const ChromeStatus& strict_error) {
  text.reserve(text.size() + 64);  // simdjson's padding, so the text is read in place
  ChromeDocInfo again;
  uint64_t seen = 0;
  const ChromeStatus s = parse_json_strict(
      std::as_const(text), [&](const ChromeEventView& e) { return ++seen <= delivered || !on_event || on_event(e); },
      again);
  if (!s.ok()) return strict_error;
  info = std::move(again);
  info.not_strict = note;
  info.closed_by_reader = closed;
  return s;
}

}  // namespace
}  // namespace chrome_parse

using namespace chrome_parse;

namespace {
// Strict first (in place for a padded string, the fast path); a refused text made strict and read again.
template <typename Text>
ChromeStatus parse_text_leniently(const Text& json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  uint64_t delivered = 0;
  const ChromeStatus s = parse_json_strict(
      json, [&](const ChromeEventView& e) { return ++delivered, !on_event || on_event(e); }, info);
  if (!worth_retrying(s)) return s;
  std::string text(json);
  bool closed = false;
  const std::string note = make_strict(text, &closed);
  return note.empty() ? s : read_again(text, note, closed, delivered, on_event, info, s);
}
}  // namespace

ChromeStatus parse_chrome_json(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  return parse_text_leniently(json, on_event, info);
}

ChromeStatus parse_chrome_json(const std::string& json, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  return parse_text_leniently(json, on_event, info);
}

ChromeStatus parse_chrome_file(const std::string& path, const ChromeEventFn& on_event, ChromeDocInfo& info) {
  uint64_t delivered = 0;
  const ChromeStatus s = parse_file_strict(
      path, [&](const ChromeEventView& e) { return ++delivered, !on_event || on_event(e); }, info);
  if (!worth_retrying(s)) return s;
  std::string text;
  if (!read_chrome_bytes(path, text).ok()) return s;
  bool closed = false;
  const std::string note = make_strict(text, &closed);
  if (note.empty()) return s;
  ChromeStatus again = read_again(text, note, closed, delivered, on_event, info, s);
  if (!again.ok()) again.message = s.message;  // the file's own error, which names it
  return again;
}

}  // namespace ddp
