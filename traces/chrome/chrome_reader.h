#pragma once
// Reader for Chrome trace-event JSON: our own export (traces/chrome/chrome_export.h) and PyTorch profiler / Kineto
// traces. simdjson's On-Demand API does the JSON (chrome_parser.cpp): every event is handed to a callback as views into
// the text (or into simdjson's buffer, for strings with escapes), no DOM. A text over 128 KiB is read in ~64 KiB pieces
// cut between events, so simdjson's index and the text stay in the cache; a plain JSON file is streamed through a
// few-megabyte window (parse_chrome_file), a gzip file (.json.gz, by its magic bytes) is inflated whole by libdeflate
// (chrome_input.cpp). docs/kineto.md "Reading speed" has the numbers.
// Damaged input (truncated, malformed, not a trace) gives a typed error saying where (byte offset and line), never an
// exception or a crash. simdjson validates UTF-8, so invalid UTF-8 and lone surrogate escapes are syntax errors.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp {

enum class ChromeError {
  none,
  cannot_open,  // the file cannot be opened or read
  decompress,   // gzip data is damaged or truncated
  empty,        // no bytes / only whitespace
  truncated,    // the JSON ends in the middle of a value
  syntax,       // malformed JSON
  too_deep,     // nesting deeper than the reader accepts
  not_a_trace,  // valid JSON but not a trace (neither an array of events nor an object with "traceEvents")
  too_large,    // input larger than the reader accepts
};
std::string_view chrome_error_name(ChromeError e);

struct ChromeStatus {
  ChromeError error = ChromeError::none;
  std::string message;  // for errors: what is wrong and where (byte offset, line)
  uint64_t offset = 0;  // byte offset of the problem in the (decompressed) JSON text
  bool ok() const { return error == ChromeError::none; }
};

// A scalar JSON value as seen by the callback. `raw` is for arrays/objects: `text` is their JSON source text.
struct ChromeValue {
  enum Type : uint8_t { absent, null, boolean, number, string, raw };
  Type type = absent;
  std::string_view text;  // string contents (unescaped), number text, or raw JSON text
  double num = 0;         // numbers and booleans
  bool is_number() const { return type == number; }
  // The value as a key: numbers and strings both give their text ("pid": 12 and "pid": "12" are the same process).
  std::string_view key() const { return text; }
};

struct ChromeArg {
  std::string_view key;
  ChromeValue value;
};

// One trace event. Views are valid only during the callback.
struct ChromeEventView {
  char ph = 0;  // phase: 'X' complete, 'B'/'E' begin/end, 'C' counter, 'M' metadata, 'i' instant, ...
  std::string_view name, cat;
  ChromeValue pid, tid;
  ChromeValue id;              // flow ('s'/'t'/'f') and async events: what ties them together
  std::string_view bp, scope;  // a flow end's binding point ("e": the enclosing slice); an instant's scope ("s")
  bool has_ts = false, has_dur = false;
  int64_t ts_ns = 0;                // "ts" (microseconds in the file) as nanoseconds
  int64_t dur_ns = 0;               // "dur" as nanoseconds
  const ChromeArg* args = nullptr;  // the "args" object's members (nested values as raw text)
  size_t arg_count = 0;
  // Where the event's JSON text ("{...}") starts in the (decompressed) document: for a plain file, its byte in the
  // file, so that a reader can keep an event's place instead of its contents and read it again when asked.
  uint64_t offset = 0;
  const ChromeValue* arg(std::string_view key) const;
};

// Everything at the top level other than the events (e.g. "otherData", "distributedInfo", "displayTimeUnit"),
// parsed with nlohmann::json when small enough (values over 4 MiB are skipped).
struct ChromeDocInfo {
  nlohmann::json top = nlohmann::json::object();
  bool array_format = false;  // the document is a bare array of events
  uint64_t events = 0;        // events handed to the callback
  // Bytes of the largest text parsed at once: a piece of ~64 KiB for a big document cut between its events, the
  // whole text for a small one (or one that could not be cut).
  uint64_t largest_piece = 0;
  // What was read leniently, when the document was not strictly JSON (chrome_lenient.h): "" when it was.
  std::string not_strict;
  bool closed_by_reader = false;  // an Array Format document without its `]`: a writer that stopped mid-trace
  // The producer: "ddp_profile" for our export, "kineto" for PyTorch profiler traces, else "".
  std::string producer() const;
};

// Return false from the callback to stop reading (the status is then ok).
using ChromeEventFn = std::function<bool(const ChromeEventView&)>;

// Parses a JSON text. `json` need not be NUL terminated. Texts over 128 KiB are read in pieces of ~64 KiB cut between
// events, each copied into a padded buffer; a text that cannot be cut is read whole, which needs 64 bytes of
// simdjson padding after it: a view is then copied first, a std::string with that much spare capacity (what
// read_chrome_bytes returns) is read in place.
ChromeStatus parse_chrome_json(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info);
ChromeStatus parse_chrome_json(const std::string& json, const ChromeEventFn& on_event, ChromeDocInfo& info);

// Reads and parses a trace file. Plain JSON is streamed through a window of a few megabytes when it can be read in
// pieces (a file is never in memory whole then); gzip (detected by its magic bytes, not the file name) is inflated
// into memory first. Errors reading the file name it (as read_chrome_bytes's do); parse errors are parse_chrome_json's.
ChromeStatus parse_chrome_file(const std::string& path, const ChromeEventFn& on_event, ChromeDocInfo& info);
// About how many bytes of JSON text the file holds (a gzip file's inflated size from its trailer, or a guess), for a
// progress bar's total: parse_chrome_file reports to trace_read_progress() as it reads (traces/base/read_progress.h).
uint64_t chrome_text_bytes_estimate(const std::string& path);

// Reads a file into memory, inflating gzip (detected by its magic bytes, not the file name).
ChromeStatus read_chrome_bytes(const std::string& path, std::string& out);
// Inflates a gzip stream (also concatenated members). Fails with ChromeError::decompress when damaged.
ChromeStatus gunzip(std::string_view gz, std::string& out);

// True when the file starts as gzip (its magic bytes, as parse_chrome_file decides): its events' offsets are then in
// the inflated text, not in the file.
bool chrome_file_is_gzip(const std::string& path);

// Reads again the one event whose text starts at byte `offset` of a plain (not gzip) file, as parse_chrome_json would
// hand it on. False with `error` set when no event starts there (the file changed, or a wrong place).
bool read_chrome_event_at(const std::string& path, uint64_t offset, const ChromeEventFn& on_event, std::string& error);

// An owned copy of the events, for tools and tests (the viewer streams instead).
struct ChromeEvent {
  char ph = 0;
  std::string name, cat, pid, tid, id, bp, scope;
  bool has_ts = false, has_dur = false;
  int64_t ts_ns = 0, dur_ns = 0;
  std::vector<std::pair<std::string, std::string>> args;  // value text (raw JSON for arrays/objects)
  const std::string* arg(std::string_view key) const;
};
struct ChromeTrace {
  ChromeStatus status;
  ChromeDocInfo info;
  std::vector<ChromeEvent> events;
  bool ok() const { return status.ok(); }
};
ChromeTrace read_chrome_file(const std::string& path);
ChromeTrace read_chrome_text(std::string_view json);

// True for the errors whose message already names the file (reading it, inflating it): a caller that adds the file
// name to a message leaves these as they are.
bool chrome_error_names_file(ChromeError e);

}  // namespace ddp
