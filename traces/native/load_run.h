#pragma once
// Opening a run folder: its manifest and every native rank trace in it.
#include <string>
#include <vector>

#include "traces/model/run_folder.h"
#include "traces/model/run_trace.h"

namespace ddp {

// Every native rank trace in `dir` into `run.ranks` (sorted by rank), damage into `run.problems`; false with `error`
// when none is readable. The manifest is not read (load_run reads both).
bool load_rank_traces(const std::string& dir, RunTrace& run, std::string& error);

// Loads the manifest (traces/model/manifest.h; one that does not read is a line in `problems`, and absent) and every
// rank trace found in `dir`. Returns false with `error` set only when nothing usable is there; partial damage is
// listed in `problems` and the readable part is kept.
bool load_run(const std::string& dir, RunTrace& run, std::string& error);

}  // namespace ddp
