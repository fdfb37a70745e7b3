// `ddp_profile --record -- LAUNCH...`: the user's job once, with the companion recording every step's stages and
// every DataLoader worker's data path (datapath/, made here into one native trace per rank, as our own runs write)
// and torch.profiler's operator detail of a few steps beside it (one Kineto trace per rank); then analysed as our
// own runs are. A job whose companion recorded no data path (an older companion) is analysed from its Kineto traces.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "runtime/common/json_file.h"
#include "runtime/common/run_folder_setup.h"
#include "runtime/launch/cli/cli.h"
#include "runtime/launch/user_job/user_job.h"
#include "runtime/launch/user_job/user_launch.h"
#include "runtime/launch/user_job/user_manifest.h"
#include "runtime/trace_commands/trace_commands.h"
#include "traces/model/run_folder.h"
#include "traces/native/datapath_import.h"
#include "traces/native/trace_writer.h"

namespace ddp {
namespace fs = std::filesystem;

// The clock handshake of each rank, into the manifest: what the analysis aligned the ranks with, and how well.
nlohmann::json clock_json(const DatapathRun& dp) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankTrace& t : dp.ranks) {
    nlohmann::json r = {{"rank", t.rank}};
    if (t.clocks.empty()) {
      r["measured"] = false;
    } else {
      r["offset_ms"] = static_cast<double>(t.clocks.front().offset_ns) / 1e6;
      r["uncertainty_ms"] = static_cast<double>(t.clocks.front().uncertainty_ns) / 1e6;
      r["rounds"] = t.clocks.front().rounds;
    }
    ranks.push_back(r);
  }
  return {{"source", "handshake"},
          {"sync", "collective exit times over the process group, median of the rounds"},
          {"ranks", ranks}};
}

// datapath/ into rank<R>.ddpt and the clock into the manifest. False with `err` when the data path does not read.
bool write_rank_traces(const std::string& out, std::string& err) {
  DatapathRun dp;
  if (!import_datapath(out, dp, err)) return false;
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(in_run(out, kManifestFile)), nullptr, false);
  if (!manifest.is_object()) {
    err = in_run(out, kManifestFile) + ": not readable";
    return false;
  }
  uint32_t world = manifest.value("world_size", 0u);
  for (const RankTrace& t : dp.ranks) world = std::max(world, t.rank + 1);
  if (!write_native_traces(out, dp.ranks, world, err)) return false;
  manifest["clock"] = clock_json(dp);
  manifest["datapath_notes"] = dp.notes;
  for (const auto& n : dp.notes) std::cerr << "ddp_profile: note: " << n << "\n";
  return write_json_atomic(in_run(out, kManifestFile), manifest, err);
}

int run_user_record(const UserJobCommand& cmd) {
  const std::string out = record_run_folder(cmd.out_dir);
  std::string err;
  if (!prepare_run_folder(out, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  UserLaunch l;
  l.argv = cmd.launch;
  l.run_dir = out;
  l.env = {{kEnvRun, out}, {kEnvMode, "record"}};
  l.echo = true;
  l.hang_timeout_s = 0;  // the user's job, as they run it: ended only by itself or Ctrl-C
  l.time_limit_s = 24 * 3600;
  UserLaunchResult res = run_user_launch(l);
  if (!res.started) {
    std::cerr << "ddp_profile: " << res.error << "\n";
    return 2;
  }
  if (!write_user_manifest(out, cmd.launch, err)) {
    std::cerr << "ddp_profile: " << kNoCompanionMessage << "\n";
    return res.exit_code != 0 ? 1 : 2;
  }
  if (res.exit_code != 0)
    std::cerr << "ddp_profile: the job exited " << res.exit_code
              << (res.last_error_line.empty() ? "" : " (" + res.last_error_line + ")") << "\n";
  Command analyze;
  analyze.mode = Mode::analyze;
  if (has_datapath(out)) {
    if (!write_rank_traces(out, err)) {
      std::cerr << "ddp_profile: " << err << "\n";
      return 1;
    }
    analyze.inputs = {out};
  } else {
    std::error_code ec;
    for (int r = 0; r < static_cast<int>(kMaxWorldSize); ++r) {
      const std::string f = in_run(out, kineto_rank_trace_file(r));
      if (!fs::exists(f, ec)) break;
      analyze.inputs.push_back(f);
    }
  }
  if (analyze.inputs.empty()) {
    std::cerr << "ddp_profile: no rank wrote a profiler trace (" << in_run(out, kineto_rank_trace_file(0))
              << "): did the job run past the profiler's schedule (" << kEnvSchedule << ")?\n";
    return 1;
  }
  analyze.input_dir = analyze.inputs.front();
  std::cout << "run: " << out << "\n\n";
  const int rc = run_analyze(analyze);
  return res.exit_code != 0 ? 1 : rc;
}

}  // namespace ddp
