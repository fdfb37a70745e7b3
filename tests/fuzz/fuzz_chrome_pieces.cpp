// The Chrome reader's cutting of big documents into pieces (traces/chrome/chrome_pieces.cpp) on any bytes: the input
// is set between ~60 KiB and ~80 KiB of plain events, so that the first cut is looked for inside it and the document
// is big enough to be read in pieces at all (fuzz_chrome_json's inputs are mostly too small for that). The first byte
// picks the filler's layout: one line (cuts follow strings and nesting) or an event per line (cuts at line breaks).
// The document is read from memory and from a file, which cut it differently: it must never crash, hang or leak, and
// when both readings succeed they must hand on the same events.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "tests/fuzz/fuzz_support.h"
#include "traces/chrome/chrome_reader.h"

namespace {

std::string filler(size_t bytes, bool lined, int64_t& ts) {
  std::string out;
  while (out.size() < bytes) {
    out += "{\"ph\":\"X\",\"name\":\"aten::add\",\"pid\":1,\"tid\":2,\"ts\":" + std::to_string(ts++) +
           ",\"dur\":1,\"args\":{\"s\":\"},{\\\"x\\\":[1]}\"}},";
    if (lined) out += '\n';
  }
  return out;
}

// One reading's outcome: whether it succeeded, how many events it handed on and a digest of them, in order.
struct Read {
  bool ok = false;
  uint64_t events = 0;
  uint64_t digest = 0;
  void take(const ddp::ChromeEventView& e) {
    ++events;
    digest = digest * 1000003u + static_cast<uint64_t>(e.ts_ns) + e.name.size();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool lined = data[0] & 1;
  // The fillers are made once per layout (a fuzzer's execution reads ~140 KiB twice already).
  static const auto make = [](bool l) {
    int64_t ts = 1;
    std::string before = "{\"traceEvents\":[" + filler(60u << 10, l, ts);
    std::string after = filler(80u << 10, l, ts) + "{\"ph\":\"i\",\"name\":\"end\",\"pid\":1,\"tid\":2,\"ts\":0}]}";
    return std::pair<std::string, std::string>(std::move(before), std::move(after));
  };
  static const std::pair<std::string, std::string> layouts[2] = {make(false), make(true)};
  const auto& [before, after] = layouts[lined ? 1 : 0];
  std::string doc = before;
  doc.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  doc += after;

  Read in_memory, from_file;
  ddp::ChromeDocInfo in_memory_info, file_info;
  in_memory.ok = ddp::parse_chrome_json(
                     std::string_view(doc),
                     [&](const ddp::ChromeEventView& e) {
                       in_memory.take(e);
                       return true;
                     },
                     in_memory_info)
                     .ok();
  const std::string path =
      ddpfuzz::write_input("pieces.json", reinterpret_cast<const uint8_t*>(doc.data()), doc.size());
  from_file.ok = ddp::parse_chrome_file(
                     path,
                     [&](const ddp::ChromeEventView& e) {
                       from_file.take(e);
                       return true;
                     },
                     file_info)
                     .ok();
  if (in_memory.ok && from_file.ok && (in_memory.events != from_file.events || in_memory.digest != from_file.digest))
    std::abort();  // two readings of one valid document disagree on its events
  return 0;
}
