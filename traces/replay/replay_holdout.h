#pragma once
// The replay checked on steps it did not fit (docs/stalls.md, "The replay"): the error a prediction is printed with,
// and what the trust rule (replay_trust.h) reads.
//
// The analysed steps are cut into two halves in time, the first steps and the last. Each half in turn fits the
// model's parameters, per rank: each stage's typical duration (the median over the fitting steps: the statistic the
// edits set a stage to), the untracked main-thread time after each stage, each loader worker's time a batch per
// stage, its idle and the hand-over, where in its op each bucket launches, and the buckets' cost line (fit_comm's
// fixed cost plus bytes / bandwidth). The other half is replayed from those alone: no step keeps a duration, a
// leftover or a wait of its own. Only where a held-out half begins (each rank's first op, the batches already in
// flight) is taken as measured. Its steps against the measured ones give the error.
//
// Why two halves in time and not k folds: contiguous halves keep what changes along a run visible (a stage that
// doubles mid-run, bursts one half never saw; interleaved folds would each see both), and two cost two replays of
// half the run each, about one replay more than --analyze and --what-if ran before. Why each half in turn, not the
// first alone: every analysed step is then predicted once, which doubles the steps the p90 is read from.
#include <cstdint>
#include <vector>

#include "traces/rank_data/rank_data.h"
#include "traces/replay/replay.h"

namespace ddp {

// The held-out validation of the replay of `common` (the steps every rank analysed, in order). Not ok, with the
// reason, for fewer than kReplayHoldoutMinSteps steps.
ReplayHoldout replay_holdout(const std::vector<rank_data::RankData>& data, const std::vector<uint32_t>& common);

}  // namespace ddp
