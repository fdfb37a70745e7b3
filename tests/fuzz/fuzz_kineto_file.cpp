// One rank's PyTorch profiler trace read as the Kineto importer reads it (stage mapping, ranks, steps, collectives),
// then a run of two such files built and aligned: any bytes give a file status or a load error, never a crash.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "traces/kineto/kineto_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string a = ddpfuzz::write_input("rank0.pt.trace.json", data, size);
  const std::string b = ddpfuzz::write_input("rank1.pt.trace.json", data, size / 2);
  ddp::KinetoStageMap map;
  ddp::RunTrace run;
  std::string error;
  ddp::load_kineto_run({a}, map, run, error);
  ddp::load_kineto_run({a, b}, map, run, error);
  return 0;
}
