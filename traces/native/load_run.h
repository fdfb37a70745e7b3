#pragma once
// Opening a run folder: its manifest and every native rank trace in it.
#include <string>

#include "traces/model/run_folder.h"
#include "traces/model/run_trace.h"

namespace ddp {

// Loads every rank trace found in `dir`. Returns false with `error` set only when nothing usable is there; partial
// damage is listed in `problems` and the readable part is kept.
bool load_run(const std::string& dir, RunTrace& run, std::string& error);

}  // namespace ddp
