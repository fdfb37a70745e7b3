#pragma once
// A whole run: the manifest and every rank's trace, from a run folder (traces/native/load_run.h) or from a PyTorch
// job's per-rank profiler traces (traces/kineto/kineto_import.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/rank_trace.h"

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
  nlohmann::json clock_alignment = nlohmann::json::array();  // per rank: kineto_import.cpp alignment_json
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
  nlohmann::json manifest;  // the run folder's manifest.json as written; null when the folder has none (e.g. a run
                            // killed before rank 0 wrote it); for profiler traces the importer's facts (source, world)
  std::optional<KinetoImportReport> kineto;  // loaded from profiler traces: what the importer found
  std::optional<KeptSteps> step_window;      // cut to a window of steps
  std::vector<RankTrace> ranks;              // sorted by rank
  std::vector<std::string> problems;         // damaged or missing pieces, one line each
  bool from_kineto = false;  // loaded by load_kineto_run (traces/kineto/kineto_import.h), not from a run folder
  // Earliest timestamp over all ranks after clock alignment; exporters start their time axis here.
  int64_t origin_ns() const;
  // The manifest as exports write it: the file's, with the import report ("kineto") and the step window added.
  nlohmann::json exported_manifest() const;
};

}  // namespace ddp
