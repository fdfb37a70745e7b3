// The what-if replay (traces/replay/replay.h) on simulated runs: replayed as measured it gives the steps back, and
// a cause removed by the replay predicts the run that never had it — a planted straggler run against its unplanted
// twin, the twin's measured step the truth.
#include "tests/traces/analysis/analysis_sim.h"
#include "traces/replay/what_if.h"

using namespace analysis_test;

namespace {

const ddp::StallCause* cause(const ddp::Analysis& a, int rank, const std::string& stage) {
  for (const auto& c : a.causes)
    if (c.rank == rank && c.stage == stage) return &c;
  return nullptr;
}

// The planted run's prediction without its cause against the twin's measured step.
void expect_predicts_twin(Sim planted, const Sim& twin, int rank, const std::string& stage, double within) {
  const ddp::Analysis p = run_analysis(planted, "planted_" + stage);
  const ddp::Analysis t = run_analysis(twin, "twin_" + stage);
  ASSERT_TRUE(p.replay.ok) << p.replay.error;
  EXPECT_LE(p.replay.step_error_mean, ddp::kReplayTrustedError) << describe(p);
  EXPECT_TRUE(p.replay.trusted) << p.replay.untrusted_reason;
  const ddp::StallCause* c = cause(p, rank, stage);
  ASSERT_NE(c, nullptr) << describe(p);
  ASSERT_GE(c->what_if_step_ms, 0) << describe(p);
  EXPECT_NEAR(c->what_if_step_ms, t.step_ms, within * t.step_ms)
      << stage << ": predicted " << c->what_if_step_ms << " ms, the twin measured " << t.step_ms << " ms (planted "
      << p.step_ms << " ms)\n"
      << describe(p);
  EXPECT_LT(c->what_if_step_ms, 0.95 * p.step_ms) << "removing the cause must buy something";
}

}  // namespace

TEST(Replay, ReplayedAsMeasuredTheStepsComeBack) {
  for (int accum : {1, 2}) {
    Sim sim;
    sim.accum = accum;
    sim.rank[1].late_ms = 4;
    sim.rank[1].late_every = 3;
    const ddp::Analysis a = run_analysis(sim, "fit_" + std::to_string(accum));
    ASSERT_TRUE(a.replay.ok) << a.replay.error;
    EXPECT_LE(a.replay.step_error_mean, 0.05) << describe(a);
    EXPECT_LE(a.replay.step_error_p90, 0.10) << describe(a);
    EXPECT_NEAR(a.replay.replayed_step_ms, a.step_ms, 0.05 * a.step_ms);
  }
}

// The predicted run's traces come only when asked, and they are the replay's: each rank's steps, written as the run
// passed them a step at a time, average to the replayed step.
TEST(Replay, APredictedRunComesOnlyWhenAskedAndItsStepsAreTheReplays) {
  Sim sim;
  sim.workers = 2;
  sim.rank[1].late_ms = 4;
  sim.rank[1].late_every = 3;
  ddp::RunTrace run;
  run_analysis(sim, "predicted", &run);
  std::vector<ddp::rank_data::RankData> data;
  for (const ddp::RankTrace& t : run.ranks) data.push_back(ddp::rank_data::prepare(t));
  const std::vector<uint32_t> common = ddp::rank_data::common_steps(data);
  EXPECT_TRUE(ddp::replay(data, common).predicted.empty());
  const ddp::ReplayResult r = ddp::replay(data, common, {}, true);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.predicted.size(), data.size());
  double step_ns = 0;
  size_t steps = 0;
  for (const ddp::RankTrace& t : r.predicted) {
    size_t mine = 0;
    for (const ddp::Event& e : t.events)
      if (e.is_span() && e.stage_id() == ddp::Stage::step) step_ns += static_cast<double>(e.t1 - e.t0), ++mine;
    EXPECT_EQ(mine, common.size()) << "rank " << t.rank;
    steps += mine;
    EXPECT_TRUE(std::is_sorted(t.events.begin(), t.events.end(),
                               [](const ddp::Event& a, const ddp::Event& b) { return a.t0 < b.t0; }));
  }
  ASSERT_GT(steps, 0u);
  EXPECT_NEAR(step_ns / static_cast<double>(steps) / 1e6, r.fit_ms, 1e-9 * r.fit_ms);
}

TEST(Replay, AStragglersStageRemovedPredictsTheRunWithoutIt) {
  Sim twin;
  for (const char* stage : {"forward", "backward", "optimizer"}) {
    Sim planted = twin;
    if (std::string(stage) == "forward") planted.rank[1].forward = 15;
    if (std::string(stage) == "backward") planted.rank[1].backward = 25;
    if (std::string(stage) == "optimizer") planted.rank[1].optimizer = 12;
    expect_predicts_twin(planted, twin, 1, stage, 0.15);
  }
}

TEST(Replay, ASlowLoaderStageRemovedPredictsTheRunWithoutIt) {
  Sim twin;
  twin.workers = 1;
  Sim planted = twin;
  planted.rank[0].transform = 30;  // one worker: 31 ms a batch against ~16 ms of compute, rank 0 waits every step
  expect_predicts_twin(planted, twin, 0, "transform", 0.15);
}

TEST(Replay, ACauseOfNoSingleRankGetsNoPredictionAndTheJsonSaysSo) {
  Sim sim;
  sim.comm_ms = 8;  // the collective itself
  const ddp::Analysis a = run_analysis(sim, "collective");
  const ddp::StallCause* c = cause(a, -1, "allreduce");
  ASSERT_NE(c, nullptr) << describe(a);
  EXPECT_LT(c->what_if_step_ms, 0);
  const nlohmann::json j = ddp::analysis_json(a);
  EXPECT_TRUE(j["causes"][0]["what_if_step_ms"].is_null()) << j["causes"][0].dump();
  EXPECT_TRUE(j["replay"]["step_error_mean"].is_number()) << j["replay"].dump();
  EXPECT_TRUE(j["replay"]["trusted"].is_boolean());
}

namespace {

// The planted run replayed with `edit`, against the twin's measured step.
ddp::WhatIf predict(const Sim& planted, const std::string& edit, const std::string& tag) {
  ddp::RunTrace run;
  run_analysis(planted, tag, &run);
  std::vector<ddp::WhatIfEdit> edits;
  std::string err;
  EXPECT_TRUE(ddp::parse_what_if(edit, edits, err)) << err;
  ddp::WhatIf w;
  EXPECT_TRUE(ddp::what_if(run, edits, w, err)) << err;
  if (std::getenv("DDP_ANALYSIS_PRINT")) std::printf("%s", ddp::what_if_text(w).c_str());
  return w;
}

void expect_twin(const ddp::WhatIf& w, const Sim& twin, const std::string& tag, double within) {
  const ddp::Analysis t = run_analysis(twin, tag);
  ASSERT_TRUE(w.result.ok) << w.result.error;
  EXPECT_TRUE(w.trusted) << ddp::what_if_text(w);
  EXPECT_NEAR(w.result.step_ms, t.step_ms, within * t.step_ms) << "the twin measured " << t.step_ms << " ms\n"
                                                               << ddp::what_if_text(w);
  EXPECT_LT(std::fabs(w.result.step_ms - t.step_ms), std::fabs(w.result.measured_ms - t.step_ms))
      << "the prediction must be nearer the twin than the run it edits\n"
      << ddp::what_if_text(w);
}

}  // namespace

TEST(WhatIf, MoreWorkersOnALoaderBoundRunPredictTheRunThatHadThem) {
  Sim twin;
  twin.rank[0].transform = twin.rank[1].transform = 24;  // 25.5 ms a batch a worker against ~17 ms of compute
  twin.workers = 3;
  Sim planted = twin;
  planted.workers = 1;  // every rank waits ~9 ms a step
  const ddp::WhatIf w = predict(planted, "workers=3", "workers_planted");
  expect_twin(w, twin, "workers_twin", 0.20);
  auto wait = [](const std::map<std::string, double>& m) { return m.count("wait_data") ? m.at("wait_data") : 0.0; };
  EXPECT_LT(wait(w.result.stage_ms), 0.25 * wait(w.result.fit_stage_ms)) << ddp::what_if_text(w);
}

TEST(WhatIf, ALinkTwiceAsFastPredictsTheRunThatHadIt) {
  Sim twin;
  twin.comm_ms = 3;  // four buckets of 25 MB at 3 ms: the collective dominates
  Sim planted = twin;
  planted.comm_ms = 6;
  // The run's own bandwidth: 25 MB in 6 ms; the edit asks for twice that.
  const double gbps = 2 * (25.0 * (1 << 20)) / 6e-3 / 1e9;
  const ddp::WhatIf w = predict(planted, "bandwidth=" + std::to_string(gbps) + "GB/s", "link_planted");
  expect_twin(w, twin, "link_twin", 0.15);
}

TEST(WhatIf, BiggerBucketsPredictTheRunThatHadThem) {
  Sim twin;
  twin.buckets = 2;
  twin.bucket_bytes = 50u << 20;
  twin.comm_ms = 4;  // the same bytes per second as the planted run: fewer, later launches
  Sim planted;
  planted.buckets = 8;
  planted.bucket_bytes = 12800u << 10;
  planted.comm_ms = 1;
  const ddp::WhatIf w = predict(planted, "bucket_cap_mb=50", "buckets_planted");
  expect_twin(w, twin, "buckets_twin", 0.15);
}

TEST(WhatIf, AStragglersStageAsOnTheMedianRankFromTheCommandLinesEdit) {
  Sim twin;
  Sim planted = twin;
  planted.rank[1].forward = 15;
  const ddp::WhatIf w = predict(planted, "rank1.forward=median", "median_planted");
  expect_twin(w, twin, "median_twin", 0.15);
  EXPECT_EQ(w.assumptions.size(), 1u);
}

TEST(WhatIf, AnEditTheRunCannotTakeSaysWhy) {
  Sim sim;
  sim.loader_spans = false;  // a trace without the data path
  const ddp::WhatIf w = predict(sim, "workers=4", "no_loader");
  EXPECT_FALSE(w.result.ok);
  EXPECT_NE(w.result.error.find("loader"), std::string::npos) << w.result.error;
  const nlohmann::json j = ddp::what_if_json(w);
  EXPECT_TRUE(j["step_ms"].is_null());
  EXPECT_FALSE(j["reason"].get<std::string>().empty());
}

TEST(WhatIf, EditsAreReadOrRefusedWithTheirForm) {
  std::vector<ddp::WhatIfEdit> e;
  std::string err;
  ASSERT_TRUE(
      ddp::parse_what_if("workers=4,prefetch=3,bandwidth=10Gb/s,bucket_cap_mb=50,rank1.transform=median", e, err))
      << err;
  ASSERT_EQ(e.size(), 5u);
  EXPECT_DOUBLE_EQ(e[2].edit.value, 10e9 / 8);
  EXPECT_DOUBLE_EQ(e[3].edit.value, 50.0 * 1024 * 1024);
  EXPECT_EQ(e[4].edit.rank, 1);
  for (const char* bad :
       {"workers=-1", "workers=two", "prefetch=0", "bandwidth=0", "bandwidth=fast", "bucket_cap_mb=-3",
        "rank1.forward=3", "rank1.wait_data=median", "rank1.nosuch=median", "rankx.forward=median", "ranks=1",
        "accum=0", "nodes=0", "replicas=4", "workers", "workers=2,workers=3", ""}) {
    EXPECT_FALSE(ddp::parse_what_if(bad, e, err)) << bad;
    EXPECT_NE(err.find("--what-if"), std::string::npos) << bad << ": " << err;
  }
}

TEST(WhatIf, AnEditOfARankTheRunDoesNotHaveIsRefused) {
  Sim sim;
  ddp::RunTrace run;
  run_analysis(sim, "no_rank", &run);
  std::vector<ddp::WhatIfEdit> edits;
  std::string err;
  ASSERT_TRUE(ddp::parse_what_if("rank7.forward=median", edits, err));
  ddp::WhatIf w;
  EXPECT_FALSE(ddp::what_if(run, edits, w, err));
  EXPECT_NE(err.find("no rank 7"), std::string::npos) << err;
}

TEST(WhatIf, AccumulationPredictsTheRunThatAccumulated) {
  Sim twin;
  twin.accum = 4;
  twin.comm_ms = 2;  // four buckets of 2 ms: the collective once a step instead of four times
  Sim planted = twin;
  planted.accum = 1;
  planted.steps = 40;
  twin.steps = 10;
  const ddp::WhatIf w = predict(planted, "accum=4", "accum_planted");
  expect_twin(w, twin, "accum_twin", 0.15);
  EXPECT_NE(ddp::what_if_text(w).find("a micro-batch"), std::string::npos);
}

TEST(WhatIf, MoreRanksCostTheRingsBytesAsALinkThatMuchSlower) {
  Sim sim;
  sim.comm_ms = 3;  // comm-bound: the ring's bytes show in the step
  ddp::RunTrace run;
  run_analysis(sim, "ranks", &run);
  auto replayed = [&](const std::string& edit) {
    std::vector<ddp::WhatIfEdit> edits;
    std::string err;
    EXPECT_TRUE(ddp::parse_what_if(edit, edits, err)) << err;
    ddp::WhatIf w;
    EXPECT_TRUE(ddp::what_if(run, edits, w, err)) << err;
    EXPECT_TRUE(w.result.ok) << w.result.error;
    return w;
  };
  const ddp::WhatIf eight = replayed("ranks=8");
  // A ring of 8 moves 2*7/8 of each bucket over each link where a ring of 2 moves 1: the same as 2 ranks on a link
  // 1.75x slower (the fitted fixed cost is 0 here: every bucket has the same size).
  const double bus = eight.result.comm_bus_bytes_per_s;
  ASSERT_GT(bus, 0);
  const ddp::WhatIf slower = replayed("bandwidth=" + std::to_string(bus / 1.75 / 1e9) + "GB/s");
  EXPECT_NEAR(eight.result.step_ms, slower.result.step_ms, 0.01 * slower.result.step_ms);
  EXPECT_GT(eight.result.step_ms, 1.15 * eight.result.fit_ms) << ddp::what_if_text(eight);
  // Across two machines the ring's slowest link sets its pace; without that link there is nothing to scale by.
  const ddp::WhatIf two_nodes = replayed("ranks=8,nodes=2,bandwidth=" + std::to_string(bus / 4 / 1e9) + "GB/s");
  EXPECT_GT(two_nodes.result.step_ms, eight.result.step_ms) << ddp::what_if_text(two_nodes);
  std::vector<ddp::WhatIfEdit> edits;
  std::string err;
  ASSERT_TRUE(ddp::parse_what_if("nodes=2", edits, err));
  ddp::WhatIf w;
  ASSERT_TRUE(ddp::what_if(run, edits, w, err));
  EXPECT_FALSE(w.result.ok);
  EXPECT_NE(w.result.error.find("bandwidth="), std::string::npos) << w.result.error;
}

TEST(WhatIf, ADeeperQueuePredictsTheRunThatHadIt) {
  // One worker about as fast as the steps, the steps uneven (every 4th takes 20 ms more): a queue of one batch
  // cannot bank the slack of the long steps for the short ones; a queue of four can.
  Sim twin;
  twin.workers = 1;
  twin.prefetch = 4;
  twin.rank[0].transform = twin.rank[1].transform = 19;
  for (auto& k : twin.rank) k.late_ms = 20, k.late_every = 4;
  twin.steps = 40;
  Sim planted = twin;
  planted.prefetch = 1;
  const ddp::WhatIf w = predict(planted, "prefetch=4", "prefetch_planted");
  expect_twin(w, twin, "prefetch_twin", 0.15);
}

TEST(WhatIf, NoWorkersPutsEveryFetchOnTheRanksOwnThread) {
  Sim twin;
  twin.workers = 2;
  Sim planted = twin;  // the same loader: workers=0 must cost each step its whole fetch
  const ddp::WhatIf w = predict(planted, "workers=0", "no_workers");
  ASSERT_TRUE(w.result.ok) << w.result.error;
  // A fetch is disk_read 1 + transform 1 + pin 0.5 ms: each step pays it on its own thread now.
  EXPECT_NEAR(w.result.step_ms - w.result.fit_ms, 2.5, 0.6) << ddp::what_if_text(w);
}

// One rule for the stages an edit may set (editable()): --what-if refuses the rest, naming the ones it takes, and
// every stage it takes moves the prediction when it is a rank's straggler.
TEST(WhatIf, OnlyAStageTheReplayRunsCanBeSet) {
  EXPECT_EQ(ddp::editable_stage_names(),
            "disk_read, transform, pin, h2d, forward, backward, optimizer, checkpoint, collate, other");
  std::vector<ddp::WhatIfEdit> e;
  std::string err;
  for (const char* stage : {"worker_start", "step", "kernel", "cuda_api", "sync", "memcpy_h2d", "wait_gpu", "nccl"}) {
    EXPECT_FALSE(ddp::parse_what_if(std::string("rank1.") + stage + "=median", e, err)) << stage;
    EXPECT_NE(err.find("--what-if"), std::string::npos) << stage << ": " << err;
    const bool waits = std::string(stage) == "wait_gpu" || std::string(stage) == "nccl";  // told to edit another
    if (!waits) {
      EXPECT_NE(err.find("(editable: disk_read, "), std::string::npos) << stage << ": " << err;
    }
  }
  EXPECT_FALSE(ddp::parse_what_if("rank1.nosuch=median", e, err));
  EXPECT_NE(err.find("(editable: disk_read, "), std::string::npos) << err;
  for (const char* stage : {"h2d", "forward", "backward", "optimizer", "checkpoint", "transform"}) {
    Sim planted;
    planted.steps = 12;
    if (std::string(stage) == "h2d") planted.rank[1].h2d = 10;
    if (std::string(stage) == "forward") planted.rank[1].forward = 15;
    if (std::string(stage) == "backward") planted.rank[1].backward = 25;
    if (std::string(stage) == "optimizer") planted.rank[1].optimizer = 12;
    if (std::string(stage) == "checkpoint") planted.rank[1].checkpoint = 20;
    if (std::string(stage) == "transform") planted.workers = 1, planted.rank[1].transform = 30;
    const ddp::WhatIf w = predict(planted, std::string("rank1.") + stage + "=median", std::string("editable_") + stage);
    ASSERT_TRUE(w.result.ok) << stage << ": " << w.result.error;
    EXPECT_LT(w.result.step_ms, 0.95 * w.result.fit_ms) << stage << "\n" << ddp::what_if_text(w);
  }
}
