// The .ddpd dataset reader on any bytes: open() checks the header and every label; a read of the first samples.
#include <cstdint>
#include <string>

#include "runtime/data/dataset_file.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::DatasetFile f;
  std::string error;
  if (!f.open(ddpfuzz::write_input("data.ddpd", data, size), error)) return 0;
  const int64_t n = std::min<int64_t>(f.samples(), 4);
  int64_t idx[4] = {0, 1, 2, 3};
  ddp::RawBatch raw;
  f.read(idx, static_cast<size_t>(n), raw);
  return 0;
}
