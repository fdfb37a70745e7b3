// The Chrome/Kineto JSON reader on any bytes: in memory (whole and in pieces) and as a file (plain, or gzip when the
// bytes start with its magic). It must return a status, never crash, hang or leak.
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"
#include "traces/chrome/chrome_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::ChromeDocInfo info;
  uint64_t events = 0;
  const ddp::ChromeEventFn count = [&](const ddp::ChromeEventView&) {
    ++events;
    return true;
  };
  ddp::parse_chrome_json(std::string_view(reinterpret_cast<const char*>(data), size), count, info);
  ddp::ChromeDocInfo file_info;
  ddp::parse_chrome_file(ddpfuzz::write_input("trace.json", data, size), count, file_info);
  return 0;
}
