#pragma once
// The GPU's own time, per rank, from its activity records (CUPTI in our runs, the GPU events of a PyTorch profiler
// trace): how the device's busy time splits into compute, communication and memory work, how much communication runs
// while compute runs (Holistic Trace Analysis' comm/compute overlap), and why the device sat idle between records.
// docs/stalls.md, "GPU time", defines every number and says where HTA's definitions differ.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/run_folder.h"

namespace ddp {

// Gaps between consecutive records on one stream, summed over the rank's streams.
struct GpuIdleSplit {
  double host_wait_ms = 0;    // the next record was launched only after the previous one ended: nothing was queued
  double kernel_wait_ms = 0;  // queued, and the gap is at most kKernelWaitMaxGapNs: the device's launch overhead
  double other_ms = 0;        // queued, and a longer gap: a wait on another stream, an event, a synchronisation
  uint64_t unmatched = 0;     // gaps whose next record has no launch call in the trace (counted as other)
};

struct GpuTime {
  int rank = 0;
  size_t streams = 0;
  uint64_t records = 0;
  double window_ms = 0;              // the first record's start to the last record's end
  double busy_ms = 0;                // time any record runs
  double compute_ms = 0;             // time any compute kernel runs
  double communication_ms = 0;       // time any communication (NCCL) kernel runs
  double memory_ms = 0;              // time any memcpy or memset runs
  double overlap_ms = 0;             // time communication and compute run at once
  double comm_compute_overlap = -1;  // overlap_ms / communication_ms; -1 when there is no communication
  double idle_ms = 0;                // window_ms - busy_ms: no record runs on any stream
  GpuIdleSplit stream_gaps;
};

// One entry per rank that has GPU activity records, in rank order; empty for CPU-only runs.
std::vector<GpuTime> gpu_time(const RunTrace& run);
nlohmann::json gpu_time_json(const GpuTime& g);

}  // namespace ddp
