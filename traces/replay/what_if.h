#pragma once
// ddp_profile --what-if EDIT RUN: the run's steps replayed (traces/replay/replay.h) with its edits, the predicted
// step beside the replay's fit to the measured one, per stage, with the assumptions each edit makes
// (docs/stalls.md, What if).
//
// EDIT is one or more of, comma-separated:
//   rank<R>.<stage>=median   rank R's stage (or `other`, its untracked time) as on the median rank, step by step
//   workers=N                N DataLoader workers per rank (0: each rank fetches its own batches)
//   prefetch=N               N batches in flight per worker
//   bandwidth=X[GB/s|Gb/s|MB/s]   the link's bus bandwidth for each bucket's ring bytes (a bare number is GB/s)
//   bucket_cap_mb=X          DDP's buckets re-cut at X MB
//   accum=K                  K micro-steps an optimizer step (no_sync on all but the last)
//   ranks=N                  N ranks in the ring (its bytes and hops scaled from the run's)
//   nodes=M                  the ranks on M machines, bandwidth=X the link between them
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/run_trace.h"
#include "traces/replay/replay.h"

namespace ddp {

struct WhatIfEdit {
  std::string text;  // as the user wrote it
  ReplayEdit edit;
};

struct WhatIf {
  std::vector<WhatIfEdit> edits;
  std::vector<std::string> assumptions;  // one line per edit
  ReplayResult result;                   // ok false: then result.error
  bool trusted = false;                  // replay_trust.h's rule, --analyze's too
  int ranks = 0;
  size_t steps = 0;
};

// The edits in `text`; false and `err` (naming the part it could not read) when one is malformed.
bool parse_what_if(const std::string& text, std::vector<WhatIfEdit>& out, std::string& err);
// The run replayed with the edits (with keep_trace, the predicted run's traces in out.result.predicted). False and
// `err` when an edit names a rank the run does not have.
bool what_if(const RunTrace& run, const std::vector<WhatIfEdit>& edits, WhatIf& out, std::string& err,
             bool keep_trace = false);
// The predicted run as a run folder `dir` (created; it must not exist or be empty): rank<R>.ddpt and a manifest, the
// run's own with "what_if" (the edits, the predicted and measured step) added. --summary, --analyze, --diff and the
// viewer read it as any run; `ddp_viewer RUN --beside DIR` draws it under the measured one.
bool write_predicted_run(const RunTrace& run, const WhatIf& w, const std::string& dir, std::string& err);
nlohmann::json what_if_json(const WhatIf& w);
std::string what_if_text(const WhatIf& w);

}  // namespace ddp
