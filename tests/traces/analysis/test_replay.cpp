// The what-if replay (traces/analysis/replay.h) on simulated runs: replayed as measured it gives the steps back, and
// a cause removed by the replay predicts the run that never had it — a planted straggler run against its unplanted
// twin, the twin's measured step the truth.
#include "tests/traces/analysis/analysis_sim.h"

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
  ASSERT_TRUE(p.replay.ok) << p.replay.reason;
  EXPECT_LE(p.replay.step_error_mean, ddp::kReplayTrustedError) << describe(p);
  EXPECT_TRUE(p.replay.trusted) << p.replay.reason;
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
    ASSERT_TRUE(a.replay.ok) << a.replay.reason;
    EXPECT_LE(a.replay.step_error_mean, 0.05) << describe(a);
    EXPECT_LE(a.replay.step_error_p90, 0.10) << describe(a);
    EXPECT_NEAR(a.replay.replayed_step_ms, a.step_ms, 0.05 * a.step_ms);
  }
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
