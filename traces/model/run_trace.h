#pragma once
// A whole run: the manifest and every rank's trace, from a run folder (traces/native/load_run.h) or from a PyTorch
// job's per-rank profiler traces (traces/kineto/kineto_import.h).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/rank_trace.h"

namespace ddp {

struct RunTrace {
  std::string dir;
  nlohmann::json manifest;            // null when the folder has none (e.g. a run killed before rank 0 wrote it)
  std::vector<RankTrace> ranks;       // sorted by rank
  std::vector<std::string> problems;  // damaged or missing pieces, one line each
  bool from_kineto = false;  // loaded by load_kineto_run (traces/kineto/kineto_import.h), not from a run folder
  // Earliest timestamp over all ranks after clock alignment; exporters start their time axis here.
  int64_t origin_ns() const;
};

}  // namespace ddp
