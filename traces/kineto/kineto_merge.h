#pragma once
// The merged export of per-rank PyTorch profiler (Kineto) traces: one Chrome trace with every original event of every
// rank's file, on the clock load_kineto_run measured, next to the stage spans the analysis read. docs/kineto.md,
// "Export", says what is kept and how it is renamed.
#include <string>

#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"

namespace ddp {

// Writes `run` (loaded by load_kineto_run) to `path`: first each rank's stage spans as the Chrome export writes them
// (process "rank R", pid R), then every event of each rank's trace file re-read in full — names, categories, args,
// thread names, flows and instants as recorded — with timestamps moved onto the common clock, each file process
// given a pid of its own and the name "rank R · <its name>", and flow ids made distinct per rank. The offsets are in
// otherData.manifest.kineto. Atomic: a failure (a trace that cannot be re-read, a full disk) leaves no file behind.
// False with `error` naming the file.
bool export_kineto_merged(const RunTrace& run, const std::string& path, ExportStats& stats, std::string& error);

}  // namespace ddp
