// The Chrome/Kineto JSON reader on any bytes: in memory (whole and in pieces), and as a file (plain, or gzip when the
// bytes start with its magic) through the viewer's reading of it into a timeline, with spans' args read back. It
// must return a status, never crash, hang or leak.
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/timeline/timeline.h"

namespace {
// What the viewer's selection does, for spans spread over every row: a place re-reads its event from the file, a text
// decompresses its block. A selection reads one span; reading every span of a real trace would be a block per span.
void read_args_texts(const ddp::Timeline& tl) {
  constexpr size_t kPerRow = 8;
  size_t chars = 0;
  for (const ddp::Process& p : tl.processes)
    for (const ddp::Lane& l : p.lanes)
      for (const ddp::Row& r : l.rows)
        for (size_t i = 0; i < r.spans.size(); i += r.spans.size() / kPerRow + 1)
          chars += tl.extra(r.spans[i]).size() + tl.name(r.spans[i]).size();
  (void)chars;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::ChromeDocInfo info;
  uint64_t events = 0;
  const ddp::ChromeEventFn count = [&](const ddp::ChromeEventView&) {
    ++events;
    return true;
  };
  ddp::parse_chrome_json(std::string_view(reinterpret_cast<const char*>(data), size), count, info);
  // The file through the viewer's reading: the reader's file path (plain, or gzip by its magic) and the timeline
  // built from it, then args read back (a plain file's places, a gzip file's compressed texts). Two readings per
  // input in all, so that a real trace of the seeds stays well under the hang limit under ASan.
  std::string error;
  ddp::Timeline from_file;
  if (ddp::timeline_from_chrome_file(ddpfuzz::write_input("trace.json", data, size), from_file, error))
    read_args_texts(from_file);
  return 0;
}
