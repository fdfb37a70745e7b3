#pragma once
// One of our runs written as PyTorch profiler (Kineto) traces, one file per rank (DIR/rank<R>.pt.trace.json), for the
// tools built around PyTorch's profiler: Holistic Trace Analysis (HTA), Perfetto, TensorBoard's profiler plugin, and
// our own Kineto importer. docs/kineto.md ("Our runs as Kineto traces") is the specification: which stage becomes
// which Kineto name and category, the clock, the pid/tid layout and what the files cannot say.
#include <cstdint>
#include <string>
#include <vector>

#include "traces/model/run_folder.h"

namespace ddp {

struct KinetoExportStats {
  std::vector<std::string> files;  // written, in rank order
  uint64_t events = 0;             // trace events written (spans, counters, flows; not metadata)
  uint64_t flows = 0;              // launch arrows (ac2g "s" + "f" pairs)
  uint64_t bytes = 0;
};

// The trace files (*.json, *.gz) in `dir` that exporting `run` there would not replace: HTA and --analyze read every
// trace in a folder, so writing beside them would mix two jobs. Empty when `dir` does not exist.
std::vector<std::string> foreign_trace_files(const RunTrace& run, const std::string& dir);

// Writes every rank of `run` as DIR/rank<R>.pt.trace.json (DIR is created when missing), each file through a temp
// file and a rename, so it is whole or absent. The caller checks foreign_trace_files first. False with `error` naming
// the file that could not be written (files written before it stay).
bool export_kineto(const RunTrace& run, const std::string& dir, KinetoExportStats& stats, std::string& error);

}  // namespace ddp
