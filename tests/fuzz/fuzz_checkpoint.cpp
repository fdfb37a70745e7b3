// A checkpoint folder's integrity check (the sidecar JSON beside each rank's file: size and CRC-32) on any bytes.
#include <cstdint>
#include <string>

#include "runtime/common/checkpoint_files.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The bytes split in two: the rank's file and its sidecar.
  const size_t half = size / 2;
  const std::string dir = ddpfuzz::input_dir();
  ddpfuzz::write_input("rank0.pt", data, half);
  ddpfuzz::write_input("rank0.pt.json", data + half, size - half);
  std::string error;
  ddp::verify_checkpoint_files(dir, 1, error);
  return 0;
}
