// The Chrome/Kineto JSON reader on any bytes: in memory (whole and in pieces) and as a file (plain, or gzip when the
// bytes start with its magic), and the viewer's reading of them into a timeline, with every span's args read back
// (from the file's places for a plain file). It must return a status, never crash, hang or leak.
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/timeline/timeline.h"

namespace {
// What the viewer's selection does, for every span: a place re-reads its event from the file.
void read_every_args_text(const ddp::Timeline& tl) {
  size_t chars = 0;
  for (const ddp::Process& p : tl.processes)
    for (const ddp::Lane& l : p.lanes)
      for (const ddp::Row& r : l.rows)
        for (const ddp::Span& s : r.spans) chars += tl.extra(s).size() + tl.name(s).size();
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
  ddp::ChromeDocInfo file_info;
  const std::string path = ddpfuzz::write_input("trace.json", data, size);
  ddp::parse_chrome_file(path, count, file_info);

  std::string error;
  ddp::Timeline from_text;
  ddp::timeline_from_chrome_text(std::string_view(reinterpret_cast<const char*>(data), size), from_text, error);
  ddp::Timeline from_file;
  if (ddp::timeline_from_chrome_file(path, from_file, error)) read_every_args_text(from_file);
  return 0;
}
