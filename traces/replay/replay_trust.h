#pragma once
// Whether a replay's predictions can be trusted: the one rule --analyze and --what-if apply, and the one sentence both
// say when they cannot (docs/stalls.md, "The replay").
#include <string>

#include "traces/replay/replay.h"

namespace ddp {

// The replay ran (ok), passed nothing as measured instead of by its model (no notes: a wait passed as measured gives
// its steps back by fiat, so a close fit there says nothing of the model), and gives the measured steps back within
// kReplayTrustedError on average.
bool trusted(const ReplayResult& r);

// The fit's notes as one line, "; " between them ("" when none).
std::string notes_line(const ReplayResult& r);

// Why `r` is not trusted, one sentence: its error when it did not run, else its notes, else how far it misses the
// measured steps; "" when it is trusted.
std::string distrust_reason(const ReplayResult& r);

}  // namespace ddp
