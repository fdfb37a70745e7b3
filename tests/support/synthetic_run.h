#pragma once
// A synthetic run folder (native traces written with ddp::TraceWriter): the pipeline lanes of a two-rank job, with
// optional GPU kernel spans to reach benchmark sizes. Used by the viewer tests and bench/viewer_bench.
#include <cstdint>
#include <string>

namespace ddp::viewer {

struct SyntheticRunOptions {
  int ranks = 2;
  int steps = 8;
  int buckets = 4;
  int kernels_per_step = 0;          // spans on a "gpu stream" lane, spread over forward and backward
  int64_t step_ns = 50'000'000;      // step period
  int64_t wait_data_ns = 2'000'000;  // rank 1 waits this much longer (a slow loader on rank 1)
};

// Writes manifest.json and rank<R>.ddpt into `dir` (created). Returns the number of events, or -1 with `error`.
int64_t write_synthetic_run(const std::string& dir, const SyntheticRunOptions& o, std::string& error);

}  // namespace ddp::viewer
