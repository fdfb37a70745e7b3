#pragma once
// A run folder: manifest.json, one native trace per rank (rank<R>.ddpt), trace.json and checks. This file knows the
// names; everything that opens a run goes through load_run.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/trace_reader.h"

namespace ddp {

inline const char* kManifestFile = "manifest.json";
inline const char* kChromeTraceFile = "trace.json";
std::string rank_trace_file(int rank);  // "rank<R>.ddpt"

struct RunTrace {
  std::string dir;
  nlohmann::json manifest;            // null when the folder has none (e.g. a run killed before rank 0 wrote it)
  std::vector<RankTrace> ranks;       // sorted by rank
  std::vector<std::string> problems;  // damaged or missing pieces, one line each
  // Earliest timestamp over all ranks after clock alignment; exporters start their time axis here.
  int64_t origin_ns() const;
};

// Loads every rank trace found in `dir`. Returns false with `error` set only when nothing usable is there; partial
// damage is listed in `problems` and the readable part is kept.
bool load_run(const std::string& dir, RunTrace& run, std::string& error);

}  // namespace ddp
