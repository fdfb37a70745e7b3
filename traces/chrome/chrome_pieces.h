#pragma once
// Inside the Chrome reader: reading a document in pieces (chrome_pieces.cpp), each piece parsed by read_text
// (chrome_parser.cpp), the tokenizer/parser split of Perfetto's JSON importer.
#include <cstdint>
#include <string_view>

#include "traces/chrome/chrome_reader.h"
#include "traces/chrome/chrome_text.h"

namespace ddp::chrome_parse {

// One reading of `text` (padded to `capacity`) whose user bytes are [user, user + size) of it, at `base` in the
// document `lines` counts; `skip` events are parsed but not handed on; `events_only`: a bare array of events.
struct Reading {
  ChromeStatus status;
  uint64_t handed_on = 0;
  bool stopped = false;
};
Reading read_text(std::string_view text, size_t capacity, size_t user, size_t size, const LineCounter& lines,
                  uint64_t base, uint64_t skip, bool events_only, const ChromeEventFn& on_event, ChromeDocInfo& info);

// Reads the document in pieces; false in `used` when its beginning does not allow it (then nothing was handed on).
ChromeStatus parse_chunked(DocText& doc, const ChromeEventFn& on_event, ChromeDocInfo& info, bool& used);
// A text in memory read in pieces (which are copied, so `json` needs no padding) when it is big enough and can be
// cut; false in `done` otherwise.
ChromeStatus parse_in_pieces(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info, bool& done);

}  // namespace ddp::chrome_parse
