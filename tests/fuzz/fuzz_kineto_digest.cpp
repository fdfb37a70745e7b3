// A digest read as --analyze reads it (traces/kineto/kineto_digest.h), then imported and analysed as one rank: any
// bytes give a damaged rank or a run, never a crash or an unbounded allocation. The input is the digest's payload
// (its seeds are real digests' payloads, tests/data/fuzz/digest), framed here as a digest file, so that mutations
// reach the header's fields and the spans rather than stopping at the magic and the zstd frame; an input whose first
// byte is 0 is written as the whole file instead.
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "traces/analysis/analysis.h"
#include "traces/kineto/kineto_digest.h"
#include "traces/kineto/kineto_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file;
  if (size > 0 && data[0] == 0) {
    file.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  } else {
    file = "DDPDGST1";
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>(static_cast<uint64_t>(size) >> (8 * i)));
    std::string frame(ZSTD_compressBound(size), '\0');
    const size_t n = ZSTD_compress(frame.data(), frame.size(), data, size, 1);
    if (ZSTD_isError(n)) return 0;
    file.append(frame.data(), n);
  }
  const std::string path =
      ddpfuzz::write_input("rank0.fuzz.ddpdigest", reinterpret_cast<const uint8_t*>(file.data()), file.size());
  ddp::read_digest(path);
  ddp::RunTrace run;
  std::string error;
  if (ddp::load_kineto_run({path}, ddp::KinetoStageMap{}, run, error)) ddp::analyze(run);
  return 0;
}
