#pragma once
// Opening a run folder: its manifest and every native rank trace in it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/run_folder.h"
#include "traces/model/run_trace.h"

namespace ddp {

// DIR/manifest.json, the one reader of it: the object, or null with one line in `problems` saying what is wrong
// (missing, unreadable, not a JSON object).
nlohmann::json read_manifest(const std::string& dir, std::vector<std::string>& problems);

// Every native rank trace in `dir` into `run.ranks` (sorted by rank), damage into `run.problems`; false with `error`
// when none is readable. The manifest is not read (load_run reads both).
bool load_rank_traces(const std::string& dir, RunTrace& run, std::string& error);

// Loads every rank trace found in `dir`. Returns false with `error` set only when nothing usable is there; partial
// damage is listed in `problems` and the readable part is kept.
bool load_run(const std::string& dir, RunTrace& run, std::string& error);

}  // namespace ddp
