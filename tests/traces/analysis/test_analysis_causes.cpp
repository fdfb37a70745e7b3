// Stall analysis on synthetic runs (tests/traces/analysis/analysis_sim.h): causes: each test plants one pattern and
// checks what analyze() names, and that a balanced run names nothing.
#include "tests/traces/analysis/analysis_sim.h"

using namespace analysis_test;

TEST(Analysis, BalancedRunNamesNoDominantStallAndNoFlags) {
  Sim sim;
  ddp::Analysis a = run_analysis(sim, "balanced");
  EXPECT_EQ(a.world, 2);
  EXPECT_EQ(a.steps, 19u);
  EXPECT_EQ(a.warmup_steps, 1u);
  ASSERT_EQ(a.ranks.size(), 2u);
  for (const auto& c : a.causes) {
    EXPECT_LT(c.share, ddp::kDominantShare) << describe(a);
    // Only the collective's inherent tail after backward may show; no rank is blamed.
    EXPECT_EQ(c.rank, -1) << describe(a);
    EXPECT_EQ(c.stage, "allreduce") << describe(a);
  }
  EXPECT_EQ(a.verdict.rfind("no dominant stall: compute bound", 0), 0u) << a.verdict;
  EXPECT_TRUE(a.flags.empty()) << describe(a);
  for (const auto& r : a.ranks) {
    EXPECT_EQ(r.steps, 19u);
    EXPECT_NEAR(r.micro_steps, 1.0, 1e-9);
    EXPECT_LT(r.wait_data_ms, 0.2) << describe(a);
    EXPECT_GT(r.overlap_pct, 50.0);
    EXPECT_NEAR(r.allreduce.count_per_step, 4.0, 1e-9);
    EXPECT_NEAR(r.allreduce.bytes_per_step, 4.0 * (25 << 20), 1);
    EXPECT_EQ(r.loader.workers, 2);
    EXPECT_LT(r.loader.utilization, 0.5);
    EXPECT_NEAR(r.stages_ms_per_step.at("forward"), 5.0, 0.2);
  }
}

// Every slow-down knob on every rank: the analysis names that stage on that rank as the top cause.
namespace {
struct Knob {
  const char* stage;
  int rank;
};
void PrintTo(const Knob& k, std::ostream* os) { *os << k.stage << " on rank " << k.rank; }
}  // namespace
class AnalysisKnob : public ::testing::TestWithParam<Knob> {};

TEST_P(AnalysisKnob, TopCauseIsThePlantedStageAndRank) {
  const Knob k = GetParam();
  Sim sim;
  RankKnobs& r = sim.rank[static_cast<size_t>(k.rank)];
  const std::string st = k.stage;
  // Loader stages must be slow enough that two workers cannot keep up (~17 ms of compute per batch).
  if (st == "disk_read") r.disk_read += 60;
  if (st == "transform") r.transform += 60;
  if (st == "pin") r.pin += 60;
  if (st == "h2d") r.h2d += 10;
  if (st == "forward") r.forward += 10;
  if (st == "backward") r.backward_tail += 10;  // as the runtime sleeps: after the buckets launched
  if (st == "optimizer") r.optimizer += 10;
  if (st == "wait_gpu") r.wait_gpu += 10;  // a rank whose GPU is slower: its host waits longer at the read-back
  ddp::Analysis a = run_analysis(sim, std::string("knob_") + k.stage);
  ASSERT_FALSE(a.causes.empty()) << describe(a);
  const ddp::StallCause& top = a.causes.front();
  EXPECT_EQ(top.rank, k.rank) << describe(a);
  EXPECT_EQ(top.stage, st) << describe(a);
  EXPECT_GE(top.share, ddp::kDominantShare) << describe(a);
  EXPECT_NE(a.verdict.find("dominant stall: rank " + std::to_string(k.rank) + " " + st), std::string::npos)
      << a.verdict;
  // The peer is a victim: it waited in allreduce for the slow rank.
  const int peer = 1 - k.rank;
  bool peer_victim = false;
  for (const auto& v : top.victims) peer_victim |= v.rank == peer && v.stage == "wait_comm" && v.ms > 0;
  EXPECT_TRUE(peer_victim) << describe(a);
  EXPECT_GT(a.ranks[static_cast<size_t>(peer)].skew_ms, 5.0) << describe(a);
  // Loader knobs: the slow rank also waits for data itself, and the flag says its loader cannot keep up.
  const bool loader = st == "disk_read" || st == "transform" || st == "pin";
  EXPECT_EQ(has_flag(a, "loader_cannot_keep_up", k.rank), loader) << describe(a);
  EXPECT_FALSE(has_flag(a, "loader_cannot_keep_up", peer)) << describe(a);
  if (loader) {
    EXPECT_GT(top.evidence.at("loader_utilization").get<double>(), 1.0);
    EXPECT_GT(top.evidence.at("loader_ms_per_batch").at(st).get<double>(),
              top.evidence.at("peer_loader_ms_per_batch").at(st).get<double>() + 50);
  } else {
    EXPECT_NEAR(top.evidence.at("excess_ms_per_step").get<double>(), 10.0, 1.0) << top.evidence.dump();
  }
  // lost time ~ the planted slowness per step (the job loses it once, not once per victim)
  double planted = loader ? (60 + 2.5) / 2 - (0.5 + 5 + 10 + 1 + 0.3 * 1.5) : 10;
  EXPECT_GT(top.lost_ms_per_step, 0.6 * planted) << describe(a);
  EXPECT_LT(top.lost_ms_per_step, 1.3 * planted) << describe(a);
}

INSTANTIATE_TEST_SUITE_P(EveryKnobEveryRank, AnalysisKnob,
                         ::testing::Values(Knob{"disk_read", 0}, Knob{"disk_read", 1}, Knob{"transform", 0},
                                           Knob{"transform", 1}, Knob{"pin", 0}, Knob{"pin", 1}, Knob{"h2d", 0},
                                           Knob{"h2d", 1}, Knob{"forward", 0}, Knob{"forward", 1}, Knob{"backward", 0},
                                           Knob{"backward", 1}, Knob{"optimizer", 0}, Knob{"optimizer", 1},
                                           Knob{"wait_gpu", 0}, Knob{"wait_gpu", 1}),
                         [](const ::testing::TestParamInfo<Knob>& i) {
                           return std::string(i.param.stage) + "_rank" + std::to_string(i.param.rank);
                         });

TEST(Analysis, SlowCommunicationIsNamedAsTheCollectiveItself) {
  Sim sim;
  sim.comm_ms = 6;  // 4 buckets x 6 ms against a 10 ms backward: ~14 ms exposed per step
  ddp::Analysis a = run_analysis(sim, "comm");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, -1) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "allreduce");
  EXPECT_NEAR(a.causes.front().lost_ms_per_step, 16.5, 1.5) << describe(a);
  EXPECT_EQ(a.verdict.rfind("communication bound", 0), 0u) << a.verdict;
  EXPECT_EQ(a.causes.front().victims.size(), 2u);
  for (const auto& r : a.ranks) EXPECT_LT(r.skew_ms, 1.0);
}

TEST(Analysis, AllreduceBandwidthOverlapAndSkewFollowTheirDefinitions) {
  Sim sim;
  sim.jitter = 0;
  sim.comm_ms = 5;
  sim.world = 4;
  sim.rank = std::vector<RankKnobs>(4);
  ddp::Analysis a = run_analysis(sim, "bw");
  ASSERT_EQ(a.ranks.size(), 4u);
  for (const auto& r : a.ranks) {
    // buckets launched at 2.5, 5, 7.5, 10 ms into a 10 ms backward, 5 ms each, serialised: busy 2.5..22.5 ms
    EXPECT_NEAR(r.allreduce.time_ms_per_step, 20.0, 1e-6);
    double alg = 4.0 * (25 << 20) / 20e6;
    EXPECT_NEAR(r.allreduce.algbw_gbps, alg, 1e-6);
    EXPECT_NEAR(r.allreduce.busbw_gbps, alg * 2 * 3 / 4, 1e-6);
    // hidden under backward: 5 + 5 + 2.5 + 0 of 5 + 7.5 + 10 + 12.5
    EXPECT_NEAR(r.overlap_pct, 100.0 * 12.5 / 35.0, 1e-6);
    EXPECT_NEAR(r.skew_ms, 0.0, 1e-9);
  }
  // A slower backward on rank 1 delays its launches by 1.25, 2.5, 3.75, 5 ms: rank 0 sits in allreduce waiting for
  // its peer during [2.5, 3.75] u [5, 7.5] u [7.5, 11.25] u [10, 15] ms of backward: 11.25 ms/step of wall time.
  Sim slow;
  slow.jitter = 0;
  slow.rank[1].backward = 15;
  ddp::Analysis b = run_analysis(slow, "skew");
  EXPECT_NEAR(b.ranks[0].skew_ms, 11.25, 1e-6);
  EXPECT_NEAR(b.ranks[1].skew_ms, 0.0, 1e-9);
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(b.causes.front().rank, 1);
  EXPECT_EQ(b.causes.front().stage, "backward");
  EXPECT_NEAR(b.causes.front().lost_ms_per_step, 5.0, 1e-3) << describe(b);
}

TEST(Analysis, CheckpointAndUntrackedTimeAreCauses) {
  Sim ck;
  ck.rank[0].checkpoint = 30;  // rank 0 saves every 2nd step; rank 1 waits for it in the next allreduce
  ddp::Analysis a = run_analysis(ck, "checkpoint");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 0) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "checkpoint") << describe(a);
  EXPECT_NEAR(a.causes.front().lost_ms_per_step, 15.0, 2.0) << describe(a);

  Sim gap;
  gap.rank[1].untracked = 8;
  ddp::Analysis b = run_analysis(gap, "untracked");
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(b.causes.front().rank, 1) << describe(b);
  EXPECT_EQ(b.causes.front().stage, "other") << describe(b);
  EXPECT_NEAR(b.causes.front().evidence.at("excess_ms_per_step").get<double>(), 8.0, 1.0) << describe(b);
}

TEST(Analysis, DataWaitsWithoutLoaderSpansStayOnWaitData) {
  Sim sim;
  sim.loader_spans = false;
  sim.rank[1].transform += 60;
  ddp::Analysis a = run_analysis(sim, "noloader");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 1) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "wait_data") << describe(a);
  EXPECT_TRUE(has_flag(a, "loader_cannot_keep_up", 1));
}

// Every rank's loader equally slow (a machine short of CPU, a dataset too slow for all): the job's input pipeline is
// the cause on every rank, named once for all ranks, not as rank 0's because it came out a little ahead. One rank
// clearly slower than the others stays that rank's.
TEST(Analysis, InputWaitsEveryRankSharesAreOneCauseOfAllRanks) {
  for (const bool with_loader_spans : {false, true}) {
    Sim sim;
    sim.loader_spans = with_loader_spans;
    sim.rank[0].transform += 60;
    sim.rank[1].transform += 60;
    ddp::Analysis a = run_analysis(sim, with_loader_spans ? "shared_input_spans" : "shared_input");
    ASSERT_FALSE(a.causes.empty());
    const ddp::StallCause& top = a.causes.front();
    EXPECT_EQ(top.rank, -1) << describe(a);
    EXPECT_EQ(top.stage, with_loader_spans ? "transform" : "wait_data") << describe(a);
    EXPECT_NE(top.explanation.find("every rank waits for its own input"), std::string::npos) << top.explanation;
    for (const auto& c : a.causes) EXPECT_FALSE(c.rank >= 0 && c.stage == top.stage) << describe(a);
    EXPECT_EQ(a.verdict.find("rank "), std::string::npos) << a.verdict;
    EXPECT_NE(a.verdict.find("input bound"), std::string::npos) << a.verdict;

    sim.rank[1].transform -= 50;  // rank 0's loader now clearly the slowest: its own cause again
    ddp::Analysis b = run_analysis(sim, with_loader_spans ? "one_input_spans" : "one_input");
    ASSERT_FALSE(b.causes.empty());
    EXPECT_EQ(b.causes.front().rank, 0) << describe(b);
  }
}

TEST(Analysis, ThreeRanksBlameTheOneLateRank) {
  Sim sim;
  sim.world = 3;
  sim.rank = std::vector<RankKnobs>(3);
  sim.rank[2].forward += 10;
  ddp::Analysis a = run_analysis(sim, "three");
  ASSERT_FALSE(a.causes.empty());
  const ddp::StallCause& top = a.causes.front();
  EXPECT_EQ(top.rank, 2) << describe(a);
  EXPECT_EQ(top.stage, "forward");
  std::set<int> victims;
  for (const auto& v : top.victims) victims.insert(v.rank);
  EXPECT_EQ(victims, (std::set<int>{0, 1})) << describe(a);
  EXPECT_NEAR(top.lost_ms_per_step, 10.0, 1.5);
}

TEST(Analysis, ClockOffsetsAreApplied) {
  Sim plain;
  plain.rank[1].backward = 20;
  Sim shifted = plain;
  shifted.rank[1].clock_offset_ns = 3'000'000'000;  // rank 1's clock reads 3 s behind rank 0's
  shifted.rank[0].clock_offset_ns = 0;
  ddp::Analysis a = run_analysis(plain, "clock_a"), b = run_analysis(shifted, "clock_b");
  ASSERT_FALSE(a.causes.empty());
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(b.causes.front().rank, 1);
  EXPECT_EQ(b.causes.front().stage, "backward");
  EXPECT_NEAR(a.causes.front().lost_ms, b.causes.front().lost_ms, 1e-6);
  EXPECT_NEAR(a.ranks[0].skew_ms, b.ranks[0].skew_ms, 1e-6);
  EXPECT_EQ(a.causes.front().at_ns, b.causes.front().at_ns);
}

TEST(Analysis, WorstInstancePointsAtAWaitSpan) {
  Sim sim;
  sim.rank[0].transform += 60;
  ddp::RunTrace run;
  ddp::Analysis a = run_analysis(sim, "at", &run);
  ASSERT_FALSE(a.causes.empty());
  const ddp::StallCause& c = a.causes.front();
  const int64_t origin = run.origin_ns();
  bool found = false;
  for (const auto& r : run.ranks) {
    if (static_cast<int>(r.rank) != c.at_rank) continue;
    for (const auto& e : r.events)
      if (e.is_span() && ddp::is_wait(e.stage_id()) && e.step == c.at_step &&
          e.t0 + r.clock_offset_ns() - origin == c.at_ns)
        found = true;
  }
  EXPECT_TRUE(found) << describe(a);
  EXPECT_GT(c.at_ns, 0);
}
