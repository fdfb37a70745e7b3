#include "runtime/trace_commands/trace_commands.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <tuple>

#include "runtime/trace_commands/read_progress_bar.h"
#include "runtime/trace_commands/untracked_operators.h"
#include "traces/analysis/analysis.h"
#include "traces/analysis/summary.h"
#include "traces/base/rank_set.h"
#include "traces/chrome/chrome_export.h"
#include "traces/diff/run_diff.h"
#include "traces/flight_recorder/fr_report.h"
#include "traces/kineto/kineto_digest.h"
#include "traces/kineto/kineto_export.h"
#include "traces/kineto/kineto_import.h"
#include "traces/kineto/kineto_merge.h"
#include "traces/model/run_folder.h"
#include "traces/model/step_window.h"
#include "traces/native/load_run.h"
#include "traces/perfetto/perfetto_export.h"
#include "traces/replay/what_if.h"

namespace ddp {
namespace {
// One of our run folders, or per-rank PyTorch profiler traces (docs/kineto.md): decided by what the inputs hold.
// 1 unreadable input; 2 a --steps window the run does not reach (the usage was wrong for this run); 0 loaded.
int load_or_report(const Command& cmd, RunTrace& run) {
  std::string err;
  bool ok = false;
  {
    ReadProgressBar bar("reading", trace_input_bytes(cmd.inputs));
    if (!cmd.maps.empty() && names_digests(cmd.inputs)) {
      std::cerr << "ddp_profile: --map applies where the events are: give it to --digest, not to the digests\n";
      return 2;
    }
    if (is_kineto_input(cmd.inputs)) {
      KinetoStageMap map;
      for (const auto& m : cmd.maps) map.add_user_rule(m, err);  // checked when the command line was parsed
      ok = load_kineto_run(cmd.inputs, map, run, err, cmd.cycle);
    } else {
      ok = load_run(cmd.input_dir, run, err);
    }
  }
  if (!ok) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  for (const auto& p : run.problems) std::cerr << "ddp_profile: warning: " << p << "\n";
  if (!keep_steps(run, cmd.steps, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;
  }
  return 0;
}

// What Perfetto UI opens: a JSON trace is parsed in the browser tab, which fails past about 2 GB (chrome://tracing
// already near 800 MB). Owned here: the only code that warns about it.
constexpr uint64_t kPerfettoJsonBytes = uint64_t{2} << 30;

// A JSON export Perfetto UI cannot open: said, with a --steps window that would fit (steps of equal size assumed).
void warn_if_too_big_for_perfetto(const RunTrace& run, const std::string& path, uint64_t json_bytes) {
  if (json_bytes <= kPerfettoJsonBytes) return;
  std::cerr << "ddp_profile: warning: " << path << " holds " << json_bytes / 1e9
            << " GB of JSON: Perfetto UI opens JSON traces up to about 2 GB (chrome://tracing about 0.8 GB)";
  uint32_t first = 0, last = 0;
  if (step_range(run, first, last) && last > first) {
    const StepWindow w = steps_within(first, last, json_bytes, kPerfettoJsonBytes);
    std::cerr << "; --steps " << w.first << "-" << w.last << " (" << w.last - w.first + 1 << " of its "
              << last - first + 1 << " steps) would fit";
  }
  std::cerr << "; ddp_viewer opens it whole\n";
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
  if (int rc = load_or_report(cmd, run)) return rc;
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
  std::cout << stats.events << " events from " << run.ranks.size() << " rank(s), " << stats.flows << " launch flows, "
            << stats.bytes << " bytes\n";
  return 0;
}

// --export DIR|TRACES --format perfetto [-o FILE|FILE.tar]: Perfetto's protobuf format (docs/viewer.md).
int run_export_perfetto(const Command& cmd) {
  if (is_kineto_input(cmd.inputs) && cmd.output_file.empty()) {
    std::cerr << "ddp_profile: --export of PyTorch profiler traces needs -o FILE (the trace to write)\n";
    return 2;
  }
  RunTrace run;
  if (int rc = load_or_report(cmd, run)) return rc;
  const std::string path = cmd.output_file.empty() ? in_run(cmd.input_dir, kPerfettoTraceFile) : cmd.output_file;
  PerfettoExportStats stats;
  std::string err;
  if (!export_perfetto(run, path, stats, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::cout << "wrote " << path << ": " << stats.slices << " slices, " << stats.counters << " counter samples, "
            << stats.flows << " flows from " << run.ranks.size() << " rank(s), " << stats.bytes << " bytes"
            << (is_perfetto_archive_path(path) ? " (a tar: one file per rank and perfetto_manifest.json)" : "") << "\n";
  if (stats.clipped)
    std::cerr << "ddp_profile: note: " << stats.clipped << " spans outlasted the span enclosing them on their thread "
              << "and end with it (a Perfetto thread track nests)\n";
  return 0;
}
}  // namespace

int run_export(const Command& cmd) {
  if (cmd.export_format == "kineto") return run_export_kineto(cmd);
  if (cmd.export_format == "perfetto") return run_export_perfetto(cmd);
  RunTrace run;
  if (is_kineto_input(cmd.inputs) && cmd.output_file.empty()) {
    std::cerr << "ddp_profile: --export of PyTorch profiler traces needs -o FILE (the merged trace to write)\n";
    return 2;
  }
  if (names_digests(cmd.inputs)) {  // the merged trace carries every event of the files; a digest has their stages
    std::cerr << "ddp_profile: --export reads the traces themselves, not digests (--format perfetto exports the "
                 "stages digests keep)\n";
    return 2;
  }
  if (int rc = load_or_report(cmd, run)) return rc;
  std::string path = cmd.output_file.empty() ? cmd.input_dir + "/" + kChromeTraceFile : cmd.output_file;
  ExportStats stats;
  std::string err;
  bool ok = false;
  {
    // The merged export reads every rank's file again (twice with --steps: its flows first).
    const uint64_t again = is_kineto_run(run) ? trace_input_bytes(cmd.inputs) : 0;
    ReadProgressBar bar("exporting", cmd.steps.everything() ? again : 2 * again);
    ok = is_kineto_run(run) ? export_kineto_merged(run, path, stats, err) : export_chrome(run, path, stats, err);
  }
  if (!ok) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::error_code ec;
  const uintmax_t on_disk = std::filesystem::file_size(path, ec);
  std::cout << "wrote " << path << ": " << stats.events << " events from " << run.ranks.size() << " rank(s), "
            << stats.bytes << " bytes"
            << (!ec && on_disk != stats.bytes ? " of JSON, " + std::to_string(on_disk) + " gzip-compressed" : "")
            << "\n";
  warn_if_too_big_for_perfetto(run, path, stats.bytes);
  std::cout << kineto_report_text(run);
  return 0;
}

int run_summary(const Command& cmd) {
  RunTrace run;
  if (int rc = load_or_report(cmd, run)) return rc;
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

// --analyze of Flight Recorder dumps (docs/flight-recorder.md): where a hung job's ranks part, not stalls.
int run_analyze_fr(const Command& cmd) {
  std::vector<FrDump> dumps;
  std::string err;
  if (!read_fr_dumps(cmd.inputs, dumps, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  const FrVerdict v = match_fr_dumps(dumps);
  if (cmd.json)
    std::cout << fr_report_json(v, dumps).dump(2) << "\n";
  else
    std::cout << fr_report_text(v, dumps);
  return 0;
}

int run_analyze(const Command& cmd) {
  if (is_fr_input(cmd.inputs)) return run_analyze_fr(cmd);
  RunTrace run;
  if (int rc = load_or_report(cmd, run)) return rc;
  Analysis a = analyze(run);
  name_untracked_time(run, cmd.maps, a);
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

// --what-if EDIT RUN (docs/stalls.md, What if): the run replayed with the edits; 1 when the run cannot take them.
int run_what_if(const Command& cmd) {
  std::string err;
  RunTrace run;
  if (int rc = load_or_report(cmd, run)) return rc;
  WhatIf w;
  if (!what_if(run, cmd.what_if_edits, w, err, !cmd.output_file.empty())) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;
  }
  if (!cmd.output_file.empty() && w.result.ok) {
    if (!write_predicted_run(run, w, cmd.output_file, err)) {
      std::cerr << "ddp_profile: --what-if -o " << cmd.output_file << ": " << err << "\n";
      return 1;
    }
    std::cerr << "ddp_profile: the predicted run is in " << cmd.output_file << " (ddp_viewer " << run.dir
              << " --beside " << cmd.output_file << ")\n";
  }
  if (cmd.json)
    std::cout << what_if_json(w).dump(2) << "\n";
  else
    std::cout << what_if_text(w);
  if (!w.result.ok) {
    std::cerr << "ddp_profile: --what-if " << cmd.what_if << ": " << w.result.error << "\n";
    return 1;
  }
  return 0;
}

// --digest TRACES... -o DIR (docs/kineto.md, Digests): the per-rank half of --analyze, where the traces lie.
int run_digest(const Command& cmd) {
  if (cmd.inputs.size() == 1 && is_run_folder(cmd.input_dir)) {
    std::cerr << "ddp_profile: " << cmd.input_dir << " is one of our runs: its rank<R>.ddpt traces are compact "
              << "already (copy them into one folder and --analyze it); --digest reads PyTorch profiler traces\n";
    return 2;
  }
  KinetoStageMap map;
  std::string err;
  for (const auto& m : cmd.maps) map.add_user_rule(m, err);  // checked when the command line was parsed
  std::vector<DigestMade> made;
  bool ok = false;
  {
    ReadProgressBar bar("digesting", trace_input_bytes(cmd.inputs));
    ok = make_digests(cmd.inputs, map, cmd.output_file, made, err);
  }
  if (!ok) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  uint64_t in = 0, out = 0, json = 0;
  std::vector<int> ranks;
  nlohmann::json j = nlohmann::json::array();
  for (const DigestMade& d : made) {
    in += d.trace_bytes;
    out += d.digest_bytes;
    json += d.json_bytes;
    if (d.rank >= 0) ranks.push_back(d.rank);
    if (!d.problem.empty()) std::cerr << "ddp_profile: warning: " << d.trace << ": " << d.problem << "\n";
    j.push_back({{"trace", d.trace},
                 {"digest", d.digest},
                 {"rank", d.rank},
                 {"trace_bytes", d.trace_bytes},
                 {"json_bytes", d.json_bytes},
                 {"digest_bytes", d.digest_bytes},
                 {"problem", d.problem}});
  }
  if (cmd.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  auto percent = [](uint64_t part, uint64_t whole) {
    char buf[32];
    const double share = whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
    std::snprintf(buf, sizeof buf, "%.2f %%", share);
    return std::string(buf);
  };
  const std::string who = ranks.empty() ? "no known rank" : describe_ranks(ranks);
  std::cout << "digested " << made.size() << " trace(s) of " << who << " into " << cmd.output_file << ": " << out
            << " bytes, " << percent(out, json) << " of their " << json << " bytes of JSON (" << percent(out, in)
            << " of the " << in << " bytes on disk); --analyze " << cmd.output_file
            << " once every node's digests are there\n";
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

// One side of --diff: a run folder, or per-rank PyTorch profiler traces (one cycle of them with --cycle).
bool load_diff_side(const std::string& input, int cycle, DiffRun& out, std::string& err) {
  if (!is_kineto_input({input})) return load_diff_run(diffable_run(input), out, err);
  RunTrace run;
  if (!load_kineto_run({input}, KinetoStageMap{}, run, err, cycle)) return false;
  for (const auto& p : run.problems) std::cerr << "ddp_profile: warning: " << p << "\n";
  out = diff_run_of_traces(run, cycle);
  return true;
}

int run_diff(const Command& cmd) {
  DiffRun a, b;
  std::string err;
  for (auto [input, cycle, run] :
       {std::tuple{cmd.diff_dirs[0], cmd.cycle, &a}, std::tuple{cmd.diff_dirs[1], cmd.diff_cycle, &b}})
    if (!load_diff_side(input, cycle, *run, err)) {
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
