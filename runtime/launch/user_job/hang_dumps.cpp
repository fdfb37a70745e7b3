#include "runtime/launch/user_job/hang_dumps.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "traces/flight_recorder/fr_match.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

std::string hang_dump_verdict(const std::string& run_dir, const std::vector<int>& ranks) {
  std::error_code ec;
  fs::create_directories(in_run(run_dir, kFlightRecorderDir), ec);
  { std::ofstream(in_run(run_dir, kFlightRecorderRequest)) << "dump\n"; }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kFrDumpWaitS);
  std::vector<std::string> paths;
  for (;;) {
    paths.clear();
    size_t answered = 0;
    for (int r : ranks) {
      const std::string p = in_run(run_dir, flight_recorder_dump_file(r));
      const bool dumped = fs::exists(p, ec);
      if (dumped) paths.push_back(p);
      answered += dumped || fs::exists(p + ".error", ec);
    }
    if (answered == ranks.size() || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (paths.empty())
    return "no Flight Recorder dump came (torch before 2.9 records no Gloo collective; a rank holding Python's lock "
           "cannot answer)";
  std::vector<FrDump> dumps;
  std::string err;
  if (!read_fr_dumps(paths, dumps, err)) return "Flight Recorder dumps unreadable: " + err;
  const FrVerdict v = match_fr_dumps(dumps);
  std::string where = in_run(run_dir, kFlightRecorderDir);
  return "Flight Recorder: " + v.headline + " (" + std::to_string(dumps.size()) + " of " +
         std::to_string(ranks.size()) + " ranks' dumps: ddp_profile --analyze " + where + ")";
}

}  // namespace ddp
