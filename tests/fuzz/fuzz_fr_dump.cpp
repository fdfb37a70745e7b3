// A Flight Recorder dump read as --analyze reads it (a pickle or JSON by content), then matched against a second
// dump cut from the same bytes: any bytes give an error or a verdict, never a crash or an unbounded allocation.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "traces/flight_recorder/fr_match.h"
#include "traces/flight_recorder/plain_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  std::string error;
  ddp::read_plain_pickle(std::string_view(reinterpret_cast<const char*>(data), size), j, error);
  const std::string a = ddpfuzz::write_input("rank0.pkl", data, size);
  const std::string b = ddpfuzz::write_input("rank1.pkl", data, size / 2);
  std::vector<ddp::FrDump> dumps;
  if (ddp::read_fr_dumps({a, b}, dumps, error)) ddp::match_fr_dumps(dumps);
  return 0;
}
