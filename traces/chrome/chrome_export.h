#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "traces/base/json_out.h"
#include "traces/model/run_folder.h"

namespace ddp {

struct ExportStats {
  uint64_t events = 0;  // trace events written (spans + counters, not metadata)
  uint64_t bytes = 0;
  uint64_t flows = 0;  // launch arrows (CUDA API call -> the GPU work it launched), each an "s" + "f" pair
};

// Writes all ranks of `run` as one Chrome trace-event JSON document (opens in Perfetto UI and chrome://tracing):
// a process per rank, a thread per lane, "X" events named by the stage vocabulary with step/epoch/micro/bucket/bytes
// args, "C" events for counters, all on rank 0's clock with time zero at the run's first event. CUDA activity
// (CUPTI) is named by its kernel/API function, in Kineto's categories (kernel, gpu_memcpy, gpu_memset, cuda_runtime,
// cuda_sync) with args stage and correlation, and each GPU record linked to the API call that launched it gets a
// flow ("s" on the call, "f" with bp "e" on the GPU slice, id = rank << 32 | correlation) so Perfetto draws an arrow.
// `more`, when given, appends events after the run's own, each as ",\n{...}" (the run's metadata always precedes them;
// the merged export of Kineto traces appends every rank file's original events). When it returns false the file is
// abandoned: nothing is written over `path`.
using MoreEvents = std::function<bool(JsonOut&)>;
bool export_chrome(const RunTrace& run, const std::string& path, ExportStats& stats, std::string& error,
                   const MoreEvents& more = {});

}  // namespace ddp
