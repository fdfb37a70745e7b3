// `ddp_profile --record -- LAUNCH...`: the user's job once, with the companion recording every step's stages and
// every DataLoader worker's data path (datapath/, made here into one native trace per rank, as our own runs write)
// and torch.profiler's operator detail of a few steps beside it (one Kineto trace per rank); then analysed as our
// own runs are. A job whose companion recorded no data path (an older companion) is analysed from its Kineto traces.
#include <algorithm>
#include <filesystem>
#include <iostream>

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
records::manifest_clock clock_record(const DatapathRun& dp) {
  records::manifest_clock c;
  c.source = "handshake";
  c.sync = "collective exit times over the process group, median of the rounds";
  c.ranks.emplace();
  for (const RankTrace& t : dp.ranks) {
    records::handshake_clock r;
    r.rank = t.rank;
    if (t.clocks.empty()) {
      r.measured = false;
    } else {
      r.offset_ms = static_cast<double>(t.clocks.front().offset_ns) / 1e6;
      r.uncertainty_ms = static_cast<double>(t.clocks.front().uncertainty_ns) / 1e6;
      r.rounds = t.clocks.front().rounds;
    }
    c.ranks->push_back(r);
  }
  return c;
}

// datapath/ into rank<R>.ddpt, and the clock and the import's notes into the manifest. False with `err` when the
// data path does not read.
bool write_rank_traces(const std::string& out, Manifest& manifest, std::string& err) {
  DatapathRun dp;
  if (!import_datapath(out, dp, err)) return false;
  uint32_t world = static_cast<uint32_t>(std::max<int64_t>(manifest.fields.world_size, 0));
  for (const RankTrace& t : dp.ranks) world = std::max(world, t.rank + 1);
  if (!write_native_traces(out, dp.ranks, world, err)) return false;
  manifest.fields.clock = clock_record(dp);
  manifest.fields.datapath_notes = dp.notes;
  for (const auto& n : dp.notes) std::cerr << "ddp_profile: note: " << n << "\n";
  return true;
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
  std::vector<records::companion_meta> metas;
  if (!read_user_metas(out, metas, err) || metas.empty()) {
    std::cerr << "ddp_profile: " << (err.empty() ? kNoCompanionMessage : err) << "\n";
    return res.exit_code != 0 || !err.empty() ? 1 : 2;
  }
  Manifest manifest = user_manifest(metas, cmd.launch);
  if (res.exit_code != 0)
    std::cerr << "ddp_profile: the job exited " << res.exit_code
              << (res.last_error_line.empty() ? "" : " (" + res.last_error_line + ")") << "\n";
  Command analyze;
  analyze.mode = Mode::analyze;
  // The manifest is written once, whole: with the clock when the data path reads, without it when not (what was
  // recorded is kept either way).
  const bool datapath = has_datapath(out);
  std::string datapath_err;
  const bool traced = datapath && write_rank_traces(out, manifest, datapath_err);
  if (!write_manifest(out, manifest, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  if (datapath && !traced) {
    std::cerr << "ddp_profile: " << datapath_err << "\n";
    return 1;
  }
  if (traced) {
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
