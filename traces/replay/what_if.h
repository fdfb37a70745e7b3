#pragma once
// ddp_profile --what-if EDIT RUN: the run's steps replayed (traces/replay/replay.h) with its edits, the predicted
// step beside the replay's fit to the measured one, per stage, with the assumptions each edit makes
// (docs/stalls.md, What if). The edits and their forms: what_if_edits.h.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/run_trace.h"
#include "traces/replay/replay.h"
#include "traces/replay/what_if_edits.h"

namespace ddp {

struct WhatIf {
  std::vector<WhatIfEdit> edits;
  std::vector<std::string> assumptions;  // one line per edit
  ReplayResult result;                   // ok false: then result.error
  bool trusted = false;                  // replay_trust.h's rule, --analyze's too
  int ranks = 0;
  size_t steps = 0;
};

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
