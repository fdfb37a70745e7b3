#pragma once
// A user's job recorded by the companion under `--record -- LAUNCH` (python/ddp_profile/events.py): every process
// of a rank (the training process, each DataLoader worker process) wrote its data-path events (traces/model/event.h
// Events, 40 bytes each) and a header (records.def datapath_process) into datapath/. This turns them into one
// RankTrace per rank, the model our own runs' native traces give, so the same analysis, export and viewer read a
// user's job as they read ours:
//   - lanes: the training process's own ("main", "comm", "pin"), then one per worker id ("loader/<w>"): a
//     non-persistent worker's processes of every epoch share their worker id's lane;
//   - only the training loader's workers (the header's train_loader): a validation loader's are left out, said once;
//   - a loader span carries the step that consumed its batch, found by (pass, batch) from the main thread's
//     wait_data for it; a batch never consumed (prefetched when the job ended) takes the step running at its start;
//   - the clock: the handshake's offset and uncertainty as the rank's start measurement;
//   - the Compose steps' totals of its processes as meta (kTransformStepMeta).
// A damaged file (an events file cut inside an event, an event naming a lane or stage its header does not) loses what
// is damaged, with a note naming the file; a header that breaks the contract is an error naming it.
#include <string>
#include <vector>

#include "traces/model/rank_trace.h"

namespace ddp {

struct DatapathRun {
  std::vector<RankTrace> ranks;    // by rank
  std::vector<std::string> notes;  // what was left out or repaired, one line each
};

// True when `run_dir` holds a datapath/ folder with at least one header.
bool has_datapath(const std::string& run_dir);

// Reads run_dir/datapath/. False with `error` set when a header breaks its record or no rank has a training process.
bool import_datapath(const std::string& run_dir, DatapathRun& out, std::string& error);

}  // namespace ddp
