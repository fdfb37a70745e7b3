#pragma once
// A whole run: the manifest and every rank's trace, from a run folder (traces/native/load_run.h) or from a PyTorch
// job's per-rank profiler traces (traces/kineto/kineto_import.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/manifest.h"
#include "traces/model/rank_trace.h"
#include "traces/model/records.h"

namespace ddp {

// One profiler trace file the Kineto importer read (traces/kineto/kineto_import.h).
struct KinetoFileRead {
  int rank = 0;
  std::string file;
  int64_t base_ns = 0;    // its baseTimeNanoseconds: the file's ts count from here
  std::string rank_from;  // how its rank was known: distributedInfo, the file name, --map
  std::string format;     // what wrote it (kineto_import.cpp format_of)
  uint64_t events = 0;
  bool cut_off = false;  // the file ends mid-trace
  std::string digest;    // read from this digest (ddp_profile --digest), "" when from the trace itself
};

// What the Kineto importer found: every file read, each rank's clock alignment, the notes, and the profiling cycles
// when a rank had several. Kept typed beside the run, so nothing reads back a report it wrote as JSON.
struct KinetoImportReport {
  std::vector<KinetoFileRead> files;
  uint32_t reference_rank = 0;
  std::vector<records::clock_alignment> clock_alignment;  // per rank, as kineto_import.cpp measured it
  std::vector<std::string> notes;
  nlohmann::json cycles;  // null with one cycle per rank
  // The report as --analyze --json and the exports show it ("kineto": files, reference_rank, clock_alignment, ...).
  nlohmann::json to_json() const;
};

// The steps a run was cut to (traces/model/step_window.h keep_steps).
struct KeptSteps {
  uint32_t first = 0, last = 0;
};

struct RunTrace {
  std::string dir;
  // The run folder's manifest.json, read once (traces/model/manifest.h); absent when the folder has none or it does
  // not read (a run killed before rank 0 wrote it; `problems` says which). For profiler traces the importer's facts:
  // source "kineto", world_size and the backend the files agree on.
  std::optional<Manifest> manifest;
  std::optional<KinetoImportReport> kineto;  // loaded from profiler traces: what the importer found
  std::optional<KeptSteps> step_window;      // cut to a window of steps
  std::vector<RankTrace> ranks;              // sorted by rank
  std::vector<std::string> problems;         // damaged or missing pieces, one line each
  bool from_kineto = false;  // loaded by load_kineto_run (traces/kineto/kineto_import.h), not from a run folder
  // How many ranks the run had: the largest of the manifest's world size, every rank trace's header and the ranks
  // present (a run cut short still had its world; a rank beyond the manifest's is still a rank).
  uint32_t world_size() const;
  // Our own job's settings (config), when the run is ours and its manifest read.
  const records::job_config* job() const { return manifest && manifest->job ? &*manifest->job : nullptr; }
  // Earliest timestamp over all ranks after clock alignment; exporters start their time axis here.
  int64_t origin_ns() const;
  // The manifest as exports write it: the file's, with the import report ("kineto") and the step window added.
  nlohmann::json exported_manifest() const;
};

}  // namespace ddp
