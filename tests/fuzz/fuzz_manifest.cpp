// A run folder's manifest.json on any bytes, read by the one reader of it (read_manifest) and written back, then the
// folder loaded.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "traces/model/manifest.h"
#include "traces/native/load_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddpfuzz::write_input("manifest.json", data, size);
  ddp::Manifest m;
  std::string why;
  if (ddp::read_manifest(ddpfuzz::input_dir(), m, why)) ddp::to_json(m);
  ddp::RunTrace run;
  std::string error;
  ddp::load_run(ddpfuzz::input_dir(), run, error);
  return 0;
}
