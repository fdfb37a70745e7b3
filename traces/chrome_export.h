#pragma once
#include <cstdint>
#include <string>

#include "traces/run_folder.h"

namespace ddp {

struct ExportStats {
  uint64_t events = 0;  // trace events written (spans + counters, not metadata)
  uint64_t bytes = 0;
};

// Writes all ranks of `run` as one Chrome trace-event JSON document (opens in Perfetto UI and chrome://tracing):
// a process per rank, a thread per lane, "X" events named by the stage vocabulary with step/epoch/micro/bucket/bytes
// args, "C" events for counters, all on rank 0's clock with time zero at the run's first event.
bool export_chrome(const RunTrace& run, const std::string& path, ExportStats& stats, std::string& error);

}  // namespace ddp
