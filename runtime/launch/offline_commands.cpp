#include "runtime/launch/offline_commands.h"

#include <filesystem>
#include <iostream>

#include "traces/analysis.h"
#include "traces/chrome_export.h"
#include "traces/run_diff.h"
#include "traces/run_folder.h"
#include "traces/summary.h"

namespace ddp {
namespace {
bool load_or_report(const std::string& dir, RunTrace& run) {
  std::string err;
  if (!load_run(dir, run, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return false;
  }
  for (const auto& p : run.problems) std::cerr << "ddp_profile: warning: " << p << "\n";
  return true;
}
}  // namespace

int run_export(const Command& cmd) {
  RunTrace run;
  if (!load_or_report(cmd.input_dir, run)) return 1;
  std::string path = cmd.output_file.empty() ? cmd.input_dir + "/" + kChromeTraceFile : cmd.output_file;
  ExportStats stats;
  std::string err;
  if (!export_chrome(run, path, stats, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::cout << "wrote " << path << ": " << stats.events << " events from " << run.ranks.size() << " rank(s), "
            << stats.bytes << " bytes\n";
  return 0;
}

int run_summary(const Command& cmd) {
  RunTrace run;
  if (!load_or_report(cmd.input_dir, run)) return 1;
  auto s = summarize(run);
  if (cmd.json)
    std::cout << summary_json(s).dump(2) << "\n";
  else
    std::cout << summary_text(s);
  return 0;
}

int run_analyze(const Command& cmd) {
  RunTrace run;
  if (!load_or_report(cmd.input_dir, run)) return 1;
  Analysis a = analyze(run);
  if (cmd.json)
    std::cout << analysis_json(a).dump(2) << "\n";
  else
    std::cout << analysis_text(a);
  return 0;
}

// A --check folder holds several runs; its main run (the one the numerics and sampler checks judge) is what --diff
// compares.
std::string diffable_run(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(in_run(dir, kChecksFile), ec) && fs::is_directory(in_run(dir, kCheckMainRun), ec))
    return in_run(dir, kCheckMainRun);
  return dir;
}

int run_diff(const Command& cmd) {
  DiffRun a, b;
  std::string err;
  for (auto [dir, run] : {std::pair{diffable_run(cmd.diff_dirs[0]), &a}, std::pair{diffable_run(cmd.diff_dirs[1]), &b}})
    if (!load_diff_run(dir, *run, err)) {
      std::cerr << "ddp_profile: " << err << "\n";
      return 1;
    }
  RunDiff d = diff_runs(a, b);
  if (cmd.json) {
    std::cout << run_diff_json(d).dump(2) << "\n";
    if (!d.warning.empty()) std::cerr << "ddp_profile: warning: " << d.warning << "\n";
  } else {
    std::cout << run_diff_text(d);
  }
  return 0;
}

}  // namespace ddp
