#pragma once
// Chrome JSON as the other readers take it (Perfetto, chrome://tracing): trailing commas (after an event's last arg,
// after the last event) and the JSON Array Format without its closing bracket — what a writer that died mid-trace
// leaves, which Perfetto reads on purpose. The strict parser (simdjson) refuses them; a document it refused is made
// strict here and read again, with a note saying what was not strictly JSON (ChromeDocInfo::not_strict).
#include <string>

#include "traces/chrome/chrome_reader.h"

namespace ddp::chrome_parse {

// Rewrites `text` into strict JSON where it differs from it in the ways above, keeping every event's byte offset: a
// trailing comma becomes a space, an unclosed array of events (the Array Format) is cut after its last whole event
// and closed. Returns what
// was changed, in one sentence; "" when nothing was (the document is strict, or damaged some other way). `closed`:
// whether an unclosed array was cut and closed.
std::string make_strict(std::string& text, bool* closed = nullptr);

// The strict readers (chrome_parser.cpp, chrome_input.cpp); the public parse_chrome_* add the lenient retry.
ChromeStatus parse_json_strict(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info);
ChromeStatus parse_json_strict(const std::string& json, const ChromeEventFn& on_event, ChromeDocInfo& info);
ChromeStatus parse_file_strict(const std::string& path, const ChromeEventFn& on_event, ChromeDocInfo& info);

}  // namespace ddp::chrome_parse
