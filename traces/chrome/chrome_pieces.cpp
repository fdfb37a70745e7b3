// The chunked reading: a big document read whole makes simdjson index all of it first and then read it again from
// memory; read in pieces of about 64 KiB, each piece's index and text stay in the cache.
#include "traces/chrome/chrome_pieces.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "traces/base/read_progress.h"

namespace ddp::chrome_parse {
namespace {

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
  return read_text(std::string_view(buf.data(), n), buf.size(), prefix.size(), body.size(), doc, at, skip, events_only,
                   on_event, info);
}

// ---- chunked reading ----
// A big document read whole makes simdjson index all of it first and then read it again from memory; read in pieces
// of about 64 KiB, each piece's index and text stay in the cache. Pieces are cut only between two events: where a
// line break separates them ("},\n{": no JSON string holds a raw line break, so the cut is never inside one), else
// where following the strings and nesting from the piece's start says an event ends (PieceCutter). A piece that does
// not parse (a line-break cut between objects nested deeper than the events, or damage) is read again longer,
// skipping the events it already handed on.
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

// In `w` (the document from a piece's start, between two events), the comma after the first event that ends at or
// after w[from], found by following strings and nesting from w[0]: its offset in the document, or kNoCut (the events
// end first, or the window does). Exact, so no cut is ever tried again, but it looks at every byte: for documents
// whose events are not separated by line breaks (JSON written on one line, as json.dump and many tools write it).
uint64_t next_cut_by_nesting(std::string_view w, uint64_t at, size_t from) {
  int64_t depth = 0;  // 0: between events
  bool in_string = false;
  for (size_t i = 0; i < w.size(); ++i) {
    const char c = w[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, whatever it is
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        ++depth;
        break;
      case '}':
      case ']':
        if (--depth < 0) return kNoCut;  // the end of the events
        break;
      case ',':
        if (depth == 0 && i >= from) return at + i;
        break;
      default:
        break;
    }
  }
  return kNoCut;
}

// Finds where pieces end. Events separated by line breaks (what profilers write) are cut at the first "},\n{" found
// (memchr: the cost of the cut is nothing next to the piece's parsing). That can fall between objects nested deeper
// than the events: the piece then does not parse, and is cut again by following the nesting. Once a window shows no
// such line break, or a second such cut failed, the rest of the document is cut by following its nesting.
class PieceCutter {
 public:
  // The cut ending a piece that starts at `at` (between two events) and is at least `min_size` long; `again`: the
  // piece cut before did not parse.
  uint64_t cut_after(DocText& doc, uint64_t at, size_t min_size, bool again) {
    const std::string_view w = doc.bytes(at, min_size + kMaxCutSearch);
    if (again && !by_nesting_ && ++failed_line_cuts_ >= 2) by_nesting_ = true;
    if (!by_nesting_ && !again) {
      const uint64_t cut = next_cut(w, at, min_size);
      if (cut != kNoCut) return cut;
      by_nesting_ = true;  // (or the events end in this window: then the one walk finds that)
    }
    return next_cut_by_nesting(w, at, min_size);
  }

 private:
  bool by_nesting_ = false;
  int failed_line_cuts_ = 0;
};

// The members after the events join those before them; the last piece's count of events is the total.
void merge_tail(ChromeDocInfo& info, ChromeDocInfo& tail) {
  for (auto it = tail.top.begin(); it != tail.top.end(); ++it) info.top[it.key()] = std::move(it.value());
  info.events = tail.events;
  info.largest_piece = std::max(info.largest_piece, tail.largest_piece);
}

}  // namespace

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
  trace_read_progress().advance(start);  // the members before the events
  uint64_t at = start;
  uint64_t skip = 0;  // events of a failed attempt at this piece, already handed on
  PieceCutter cutter;
  for (;;) {
    uint64_t cut = cutter.cut_after(doc, at, kPieceBytes, false);
    Reading r;
    // A piece that does not parse (a cut inside an event, or damage) is tried again, twice as long, until it grows
    // past kMaxPieceBytes; the rest is then read as the last piece, which names the damage.
    while (cut != kNoCut) {
      r = read_piece(doc, at, doc.bytes(at, cut - at), "[", "]", skip, true, buf, on_event, info);
      if (r.stopped) return {};
      skip += r.handed_on;
      if (r.status.ok() || cut - at > kMaxPieceBytes) break;
      cut = cutter.cut_after(doc, at, 2 * (cut - at), true);  // a damaged piece costs a few readings, not one per event
    }
    if (cut == kNoCut || !r.status.ok()) break;
    trace_read_progress().advance(cut + 1 - at);
    at = cut + 1;
    skip = 0;
  }
  // The last events, the end of the array and the members after it.
  ChromeDocInfo tail;
  tail.events = info.events;
  const std::string_view rest = doc.rest(at);
  if (!doc.read_error().ok()) return doc.read_error();
  Reading r = read_piece(doc, at, rest, object_root ? kLastPiecePrefix : "[", "", skip, false, buf, on_event, tail);
  trace_read_progress().advance(rest.size());
  merge_tail(info, tail);
  return r.status;
}

ChromeStatus parse_in_pieces(std::string_view json, const ChromeEventFn& on_event, ChromeDocInfo& info, bool& done) {
  done = false;
  if (json.size() <= kPieceBytes * 2) return {};
  MemoryText doc(json);
  return parse_chunked(doc, on_event, info, done);
}

}  // namespace ddp::chrome_parse
