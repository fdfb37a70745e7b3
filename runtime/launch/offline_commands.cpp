#include "runtime/launch/offline_commands.h"

#include <filesystem>
#include <iostream>

#include "traces/analysis/analysis.h"
#include "traces/chrome/chrome_export.h"
#include "traces/kineto/kineto_export.h"
#include "traces/kineto/kineto_import.h"
#include "traces/kineto/kineto_merge.h"
#include "traces/diff/run_diff.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"
#include "traces/analysis/summary.h"

namespace ddp {
namespace {
// One of our run folders, or per-rank PyTorch profiler traces (docs/kineto.md): decided by what the inputs hold.
bool load_or_report(const Command& cmd, RunTrace& run) {
  std::string err;
  bool ok = false;
  if (is_kineto_input(cmd.inputs)) {
    KinetoStageMap map;
    for (const auto& m : cmd.maps) map.add_user_rule(m, err);  // checked when the command line was parsed
    ok = load_kineto_run(cmd.inputs, map, run, err, cmd.cycle);
  } else {
    ok = load_run(cmd.input_dir, run, err);
  }
  if (!ok) {
    std::cerr << "ddp_profile: " << err << "\n";
    return false;
  }
  for (const auto& p : run.problems) std::cerr << "ddp_profile: warning: " << p << "\n";
  return true;
}

// Kineto input: the source, the clock alignment and the notes join the report; our runs keep their schema and only
// say their source.
void add_source(const RunTrace& run, nlohmann::json& j) {
  if (!is_kineto_run(run)) {
    j["source"] = "ddp_profile";
    return;
  }
  const nlohmann::json rep = kineto_report_json(run);
  j["source"] = "kineto";
  j["clock_alignment"] = rep["clock_alignment"];
  j["notes"] = rep["notes"];
  j["files"] = rep["files"];
}

// --export RUN --format kineto -o DIR: one PyTorch profiler trace per rank (docs/kineto.md). DIR must not hold
// other traces: HTA and --analyze read every trace in a folder, and two jobs' ranks would be read as one.
int run_export_kineto(const Command& cmd) {
  if (cmd.inputs.size() != 1 || is_kineto_input(cmd.inputs)) {
    std::cerr << "ddp_profile: --format kineto exports one of our run folders (a folder with rank<R>.ddpt); "
              << (cmd.inputs.size() != 1 ? "got several inputs" : cmd.input_dir + " is not one") << "\n";
    return 2;
  }
  RunTrace run;
  if (!load_or_report(cmd, run)) return 1;
  const std::vector<std::string> foreign = foreign_trace_files(run, cmd.output_file);
  if (!foreign.empty()) {
    std::cerr << "ddp_profile: " << cmd.output_file << " already holds other traces (" << foreign.front()
              << (foreign.size() > 1 ? " and " + std::to_string(foreign.size() - 1) + " more" : std::string())
              << "); HTA reads every trace in a folder: give a new or empty folder\n";
    return 2;
  }
  KinetoExportStats stats;
  std::string err;
  if (!export_kineto(run, cmd.output_file, stats, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  for (const auto& f : stats.files) std::cout << "wrote " << f << "\n";
  std::cout << stats.events << " events from " << run.ranks.size() << " rank(s), " << stats.flows
            << " launch flows, " << stats.bytes << " bytes\n";
  return 0;
}
}  // namespace

int run_export(const Command& cmd) {
  if (cmd.export_format == "kineto") return run_export_kineto(cmd);
  RunTrace run;
  if (is_kineto_input(cmd.inputs) && cmd.output_file.empty()) {
    std::cerr << "ddp_profile: --export of PyTorch profiler traces needs -o FILE (the merged trace to write)\n";
    return 2;
  }
  if (!load_or_report(cmd, run)) return 1;
  std::string path = cmd.output_file.empty() ? cmd.input_dir + "/" + kChromeTraceFile : cmd.output_file;
  ExportStats stats;
  std::string err;
  const bool ok = is_kineto_run(run) ? export_kineto_merged(run, path, stats, err) : export_chrome(run, path, stats, err);
  if (!ok) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::cout << "wrote " << path << ": " << stats.events << " events from " << run.ranks.size() << " rank(s), "
            << stats.bytes << " bytes\n";
  std::cout << kineto_report_text(run);
  return 0;
}

int run_summary(const Command& cmd) {
  RunTrace run;
  if (!load_or_report(cmd, run)) return 1;
  auto s = summarize(run);
  if (cmd.json) {
    nlohmann::json j = summary_json(s);
    add_source(run, j);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << summary_text(s) << kineto_report_text(run);
  }
  return 0;
}

int run_analyze(const Command& cmd) {
  RunTrace run;
  if (!load_or_report(cmd, run)) return 1;
  Analysis a = analyze(run);
  if (cmd.json) {
    nlohmann::json j = analysis_json(a);
    add_source(run, j);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << analysis_text(a);
    if (is_kineto_run(run)) std::cout << "\n" << kineto_report_text(run);
  }
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
