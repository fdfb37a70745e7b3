#pragma once
// A loader that keeps up on average and still makes its rank wait: now and then one batch's fetch outlasts what the
// queue of batches in flight can hide (a shard opened and decoded, a cold cache, a slow object-store GET).
//
// How a DataLoader hides a fetch: its workers keep `depth` batches in flight (workers x prefetch_factor; the depth is
// read from the run, as the replay reads it), and a batch is fetched while the training thread consumes the ones
// ahead of it. A batch started `depth` batches ahead has about depth x demand (compute's time for one batch) before
// it is wanted: a fetch longer than that lead makes the rank wait for the difference, however fast the other batches
// come and whatever the mean rate says. So:
// - a batch is slow when its fetch (start to end on the lane that fetched it) is longer than depth x demand;
// - the waits are the burst's when the slow batches hold at least kBurstWaitShare of the rank's waits for data, and
//   there are at least kBurstMinSlowBatches of them (a repeat, not one cold start);
// - unless the slow batches' extra time is waiting for a core (their spans' CPU splits): then they are the cores'
//   (cpu_verdict.h), not the data's;
// - a queue of ceil(slow fetch / demand) batches hides it: prefetch=K per worker, or workers=N at the run's prefetch.
//   The replay (replay_what_if.cpp) then says what each buys.
#include <string>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"

namespace ddp::analysis_detail {

// The burst of rank `d`'s loader, from its analysed batches; `L` holds its workers and demand (add_loader_measures).
LoaderBurst find_burst(const rank_data::RankData& d, const LoaderStats& L);

// "one batch in N takes M ms in rank R's fetch ...": the burst as a cause's explanation.
std::string burst_text(const LoaderBurst& b, int rank);

}  // namespace ddp::analysis_detail
