// A loader that keeps up on average but now and then takes one batch longer than its queue hides
// (traces/analysis/loader_burst.h), on synthetic runs (analysis_sim.h): named with its batches and the queue that
// would hide it, priced by the replay; and not named where the queue hides it, the loader is short of rate, or the
// slow batches waited for a core.
#include "tests/traces/analysis/analysis_sim.h"

using namespace analysis_test;

namespace {

// Two workers a rank keeping 4 batches in flight; compute uses one every ~17 ms, so the queue hides ~66 ms of a fetch.
// Rank 1's every 8th batch pays `ms` more in its read (on average 150 / 8 ~ 19 ms a batch more: the workers still
// keep up, at utilization ~0.65).
Sim bursty(double ms) {
  Sim sim;
  sim.steps = 40;
  sim.rank[1].burst_ms = ms;
  sim.rank[1].burst_every = 8;
  return sim;
}

const ddp::StallCause* cause_of(const ddp::Analysis& a, int rank, const std::string& stage) {
  for (const auto& c : a.causes)
    if (c.rank == rank && c.stage == stage) return &c;
  return nullptr;
}

}  // namespace

TEST(LoaderBurst, ABurstTheQueueCannotHideIsNamedWithItsBatchesAndTheQueueThatWould) {
  ddp::Analysis a = run_analysis(bursty(150), "burst");
  ASSERT_FALSE(a.causes.empty()) << describe(a);
  const ddp::StallCause& c = a.causes[0];
  EXPECT_EQ(c.rank, 1) << describe(a);
  EXPECT_EQ(c.stage, "disk_read") << describe(a);
  const ddp::LoaderBurst& b = a.ranks[1].loader.burst;
  EXPECT_TRUE(b.found) << describe(a);
  EXPECT_LE(a.ranks[1].loader.utilization, 1) << "keeps up on average";
  EXPECT_EQ(b.depth, 4) << "2 workers x prefetch 2, read from the run";
  EXPECT_EQ(b.slow_batches * 8, b.batches + 1) << "every 8th of the 39 analysed batches";
  EXPECT_NEAR(b.slow_fetch_ms, 152.5, 8);
  EXPECT_GE(b.wait_share, ddp::kBurstWaitShare);
  // The queue that hides it: ceil(152.5 / ~17) = 9-10 batches in flight, as prefetch per worker or as workers.
  EXPECT_GE(b.prefetch_to_hide * 2 * a.ranks[1].loader.demand_ms_per_batch, b.slow_fetch_ms);
  EXPECT_GE(b.workers_to_hide * 2 * a.ranks[1].loader.demand_ms_per_batch, b.slow_fetch_ms);
  EXPECT_NE(c.explanation.find("one batch in 8 takes"), std::string::npos) << c.explanation;
  EXPECT_NE(c.explanation.find("prefetch_factor=" + std::to_string(b.prefetch_to_hide)), std::string::npos)
      << c.explanation;
  // Priced by the replay: both edits, each hiding at least half of what the burst costs (the first burst of the run
  // finds the queue still filling).
  ASSERT_TRUE(c.evidence.contains("hidden_by")) << c.evidence.dump(2);
  ASSERT_EQ(c.evidence["hidden_by"].size(), 2u) << c.evidence.dump(2);
  for (const auto& h : c.evidence["hidden_by"])
    EXPECT_LT(h["step_ms"].get<double>(), a.step_ms - 0.5 * c.lost_ms_per_step) << c.evidence.dump(2);
  EXPECT_DOUBLE_EQ(c.what_if_step_ms, c.evidence["hidden_by"][0]["step_ms"].get<double>());
  EXPECT_FALSE(a.ranks[0].loader.burst.found) << "the steady rank";
  EXPECT_EQ(a.ranks[0].loader.burst.slow_batches, 0);
}

// The same pattern within what the queue hides (40 ms a read against ~66 ms of lead): no wait, nothing named.
TEST(LoaderBurst, ABurstTheQueueHidesIsNotNamed) {
  ddp::Analysis a = run_analysis(bursty(40), "burst_hidden");
  const ddp::LoaderBurst& b = a.ranks[1].loader.burst;
  EXPECT_FALSE(b.found) << describe(a);
  EXPECT_EQ(b.slow_batches, 0) << describe(a);
  EXPECT_EQ(cause_of(a, 1, "disk_read"), nullptr) << describe(a);
}

// A loader short of rate makes its rank wait for every batch: its fix is rate (workers), not a deeper queue, and the
// burst rule leaves it to the loader rules.
TEST(LoaderBurst, ALoaderShortOfRateIsNotABurst) {
  Sim sim = bursty(150);
  sim.rank[1].disk_read = 40;  // 2 workers make a batch every ~21 ms, compute uses one every ~17
  ddp::Analysis a = run_analysis(sim, "burst_short");
  EXPECT_GT(a.ranks[1].loader.utilization, 1) << describe(a);
  EXPECT_FALSE(a.ranks[1].loader.burst.found) << describe(a);
  ASSERT_FALSE(a.causes.empty()) << describe(a);
  EXPECT_EQ(a.causes[0].explanation.find("one batch in"), std::string::npos) << a.causes[0].explanation;
}

// Slow batches whose extra time was mostly waiting for a core are the cores', not a burst of the data.
TEST(LoaderBurst, SlowBatchesThatWaitedForACoreAreNotABurst) {
  Sim sim = bursty(150);
  sim.cores = 2;
  for (RankKnobs& k : sim.rank) k.loader_wait_share = 0.6;
  ddp::Analysis a = run_analysis(sim, "burst_cores");
  const ddp::LoaderBurst& b = a.ranks[1].loader.burst;
  EXPECT_GE(b.slow_batches, 2) << describe(a);
  EXPECT_GE(b.slow_cpu_wait_ms, ddp::kBurstCoresShare * (b.slow_fetch_ms - b.typical_fetch_ms)) << describe(a);
  EXPECT_FALSE(b.found) << describe(a);
}
