#pragma once
// Whether a replay's predictions can be trusted: the one rule --analyze and --what-if apply, and the one sentence both
// say when they cannot (docs/stalls.md, "The replay").
#include <string>

#include "traces/replay/replay.h"

namespace ddp {

// The replay ran (ok), passed nothing as measured instead of by its model (no notes: a wait passed as measured gives
// its steps back by fiat), and, fitted on one half of the steps, predicts the other half's mean step within
// kReplayTrustedError, each half in turn (r.holdout.mean_step_error, replay_holdout.h). Not the fit: the replay of
// the run as measured gives its own input back, which says the graph is built right and nothing of what the model
// predicts.
bool trusted(const ReplayResult& r);

// The fit's notes as one line, "; " between them ("" when none).
std::string notes_line(const ReplayResult& r);

// Why `r` is not trusted, one sentence: its error when it did not run, else its notes, else why nothing was held
// out, else how far it misses the mean step of the steps it did not fit; "" when it is trusted.
std::string distrust_reason(const ReplayResult& r);

}  // namespace ddp
