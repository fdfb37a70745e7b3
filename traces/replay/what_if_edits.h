#pragma once
// An edit of the what-if replay (replay.h): what it changes (ReplayEdit), the stages it may set (editable), and how
// the command line writes it (--what-if EDIT, parse_what_if). A target of its own (ddp_traces_replay_edits: the model
// only), so that the parsed command line (runtime/common/command.h) holds the edits without the replay.
//
// EDIT is one or more of, comma-separated, each once:
//   rank<R>.<stage>=median   rank R's stage (or `other`, its untracked time) as on the median rank, step by step
//   workers=N                N DataLoader workers per rank (0: each rank fetches its own batches)
//   prefetch=N               N batches in flight per worker
//   bandwidth=X[GB/s|Gb/s|MB/s]   the link's bus bandwidth for each bucket's ring bytes (a bare number is GB/s)
//   bucket_cap_mb=X          DDP's buckets re-cut at X MB
//   accum=K                  K micro-steps an optimizer step (no_sync on all but the last)
//   ranks=N                  N ranks in the ring (its bytes and hops scaled from the run's)
//   nodes=M                  the ranks on M machines, bandwidth=X the link between them
//   cores=N                  each host's ranks and workers on N cores (traces/replay/contention.h; a run whose spans
//                            carry their CPU splits and its ranks' cores)
#include <cstdint>
#include <string>
#include <vector>

#include "traces/model/stages.h"

namespace ddp {

struct ReplayEdit {
  enum class Kind : uint8_t {
    stage_as_median,  // `rank`'s `stage` (or its untracked time, `other`) set to the median rank's, step by step
    workers,          // `value` loader workers per rank (batches dealt round-robin, as DataLoader does)
    prefetch,         // `value` batches in flight per worker
    bandwidth,        // each bucket's transfer at `value` bytes/s (its fixed cost kept)
    bucket_cap,       // buckets re-cut at `value` bytes (the first at most DDP's 1 MB), launched as gradients get ready
    accumulate,       // `value` micro-steps an optimizer step: the step's data, forward and backward repeated under
                      //   no_sync, the allreduce and the optimizer once
    ranks,  // `value` ranks in the ring (each bucket's bytes x 2(n-1)/n over the link, n-1 hops of fixed cost)
    nodes,  // the ranks on `value` machines: the ring's slowest link is the one between them (`bandwidth`)
    cores,  // each host's ranks on `value` cores: the waits for a core as processor sharing makes them there
  };
  Kind kind = Kind::stage_as_median;
  int rank = 0;
  Stage stage = Stage::forward;
  bool other = false;
  double value = 0;
};

// The stages an edit may set (rank<R>.<stage>=median): the work of a rank's main thread or of its loader's workers,
// its waits excepted. Those the replay runs as time of their own (replay_edits.cpp: the main thread's work ops, each
// batch's loader stages); setting any other would change nothing: a wait's time is another stage's or rank's, the
// collective's is the link's (bandwidth=X), and worker_start, the step, GPU and CUDA activity are not replayed. A
// rank's untracked main-thread time (`other`, ReplayEdit::other) may be set too.
bool editable(Stage s);
// The editable stages by name in id order, then `other`: what --what-if lists when it refuses a stage.
std::string editable_stage_names();

struct WhatIfEdit {
  std::string text;  // as the user wrote it
  ReplayEdit edit;
};

// The edits' forms, as --help and the errors list them.
extern const char* const kEditForms;

// The edits in `text`; false and `err` (naming the part it could not read) when one is malformed.
bool parse_what_if(const std::string& text, std::vector<WhatIfEdit>& out, std::string& err);

}  // namespace ddp
