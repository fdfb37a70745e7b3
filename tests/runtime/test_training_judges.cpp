// The judges of whether the training is right (runtime/check/judges_training.cpp, judges_memory.cpp, the causes of
// numerics.reference and checkpoint.resume, data.same_dataset), each on planted evidence: a correct job passes, each
// planted error fails naming its cause, and a comparison of things that never moved is no pass.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/check/judges.h"
#include "runtime/launch/user_job/user_launch.h"

namespace {
using ddp::CheckStatus;
using ddp::TrainingEvidence;
using ddp::TrainingStep;

// `steps` steps on `ranks` ranks of a job with parameters a, b, c that learns, stays finite and trains in train mode.
TrainingEvidence healthy(int steps = 20, int ranks = 2) {
  TrainingEvidence e;
  for (int r = 0; r < ranks; ++r) {
    std::vector<TrainingStep> v;
    for (int s = 0; s < steps; ++s) {
      TrainingStep t;
      t.step = s;
      t.params = 3;
      t.forwards = 1;
      t.backwards = 1;
      t.verified = s < 3;
      t.lrs = {0.1 * std::pow(0.9, s)};
      t.scheduler_steps = s;
      t.rss = 500'000'000 + (s < 3 ? 10'000'000 * s : 30'000'000) + 4'000 * s;  // warm-up, then allocator creep
      v.push_back(t);
    }
    e.per_rank.push_back(v);
  }
  return e;
}

TEST(TrainingJudges, AHealthyJobPassesEveryOne) {
  const TrainingEvidence e = healthy();
  for (const auto& r : {ddp::judge_learns(e), ddp::judge_finite(e), ddp::judge_mode(e), ddp::judge_schedule(e),
                        ddp::judge_memory(e), ddp::judge_iteration(e)})
    EXPECT_EQ(r.status, CheckStatus::pass) << r.id << ": " << r.summary;
}

TEST(TrainingJudges, NoLoggedStepIsNoPass) {
  TrainingEvidence e;
  e.per_rank.resize(2);
  for (const auto& r : {ddp::judge_learns(e), ddp::judge_finite(e), ddp::judge_mode(e)})
    EXPECT_EQ(r.status, CheckStatus::fail) << r.id;
}

TEST(TrainingJudges, ALossThatDoesNotDependOnTheParametersIsNamed) {
  TrainingEvidence e = healthy();
  for (auto& rank : e.per_rank)
    for (auto& s : rank) s.grad_zero = {"a", "b", "c"};
  auto r = ddp::judge_learns(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("the loss does not depend on the parameters"), std::string::npos) << r.summary;
  // One parameter only: named.
  e = healthy();
  for (auto& rank : e.per_rank)
    for (auto& s : rank) s.grad_zero = {"b"};
  r = ddp::judge_learns(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_EQ(r.summary.rfind("b: synced gradient exactly zero", 0), 0u) << r.summary;
  // Zero in some steps only (a ReLU dead for a while): learns.
  e = healthy();
  e.per_rank[0][4].grad_zero = {"b"};
  EXPECT_EQ(ddp::judge_learns(e).status, CheckStatus::pass);
}

TEST(TrainingJudges, ParametersOutsideTheOptimizerAndUnchangedOnesAreNamed) {
  TrainingEvidence e = healthy();
  e.outside_optimizer = {"head.weight", "head.bias"};
  auto r = ddp::judge_learns(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("head.weight, head.bias require grad but are in no optimizer param_group"),
            std::string::npos)
      << r.summary;
  e = healthy();
  for (auto& rank : e.per_rank)
    for (auto& s : rank)
      if (s.verified) s.unchanged = {"c"};
  r = ddp::judge_learns(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("leaves c bit for bit unchanged"), std::string::npos) << r.summary;
}

TEST(TrainingJudges, TheFirstNonFiniteStepAndLayerAreNamed) {
  TrainingEvidence e = healthy();
  e.per_rank[1][6].grad_nonfinite = {"a", "b"};  // the loss went inf: gradients first, the output still finite
  for (int s = 7; s < 20; ++s) {
    e.per_rank[1][s].output_finite = false;
    e.per_rank[0][s].output_finite = false;
  }
  e.per_rank[1][7].first_nonfinite_layer = "fc1 (Linear)";
  auto r = ddp::judge_finite(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("rank 1, step 6: the forward output is finite but the synced gradients of a, b are not"),
            std::string::npos)
      << r.summary;
  EXPECT_NE(r.summary.find("at step 7 the first non-finite layer is fc1 (Linear)"), std::string::npos) << r.summary;
}

TEST(TrainingJudges, EvalModeWhileTrainingFailsAFrozenModuleWarns) {
  TrainingEvidence e = healthy();
  for (auto& rank : e.per_rank)
    for (auto& s : rank) {
      s.model_in_eval = true;
      s.eval_modules = {"2 (Dropout)"};
    }
  auto r = ddp::judge_mode(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("20 optimizer step(s), from step 0, ran their forward with the model in eval mode"),
            std::string::npos)
      << r.summary;
  e = healthy();
  e.per_rank[0][2].eval_modules = {"bn (BatchNorm2d)"};
  EXPECT_EQ(ddp::judge_mode(e).status, CheckStatus::warn);
}

TEST(TrainingJudges, ASchedulerSteppedPerMicroBatchIsNamedAPerEpochOneIsNot) {
  TrainingEvidence e = healthy();
  for (auto& rank : e.per_rank)
    for (auto& s : rank) {
      s.scheduler_steps = 4 * s.step;
      s.forwards = 4;
    }
  auto r = ddp::judge_schedule(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("runs 4 times per optimizer step"), std::string::npos) << r.summary;
  e = healthy();
  for (auto& rank : e.per_rank)
    for (auto& s : rank) s.scheduler_steps = s.step / 8;  // per epoch of 8 steps
  EXPECT_EQ(ddp::judge_schedule(e).status, CheckStatus::pass);
  for (auto& rank : e.per_rank)
    for (auto& s : rank) s.scheduler_steps = -1;
  EXPECT_EQ(ddp::judge_schedule(e).status, CheckStatus::skip);  // no scheduler, the script moves the lr itself
  for (auto& rank : e.per_rank)
    for (auto& s : rank) s.lrs = {0.1};
  EXPECT_EQ(ddp::judge_schedule(e).status, CheckStatus::pass);  // no scheduler, a constant lr
}

TEST(TrainingJudges, MemoryGrowingEveryStepIsALeakASteadyJobIsNot) {
  TrainingEvidence e = healthy(40);
  for (auto& s : e.per_rank[1]) s.rss += 200'000 * s.step;  // rank 1 keeps each step's graph
  auto r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("rank 1 grows 204 KB per step from step 4 (resident +7.1 MB over 36 steps)"),
            std::string::npos)
      << r.summary;
  // Too few steps after warm-up: said, not passed.
  EXPECT_EQ(ddp::judge_memory(healthy(8)).status, CheckStatus::warn);
  // One rank holding far more than another: a warning naming both.
  e = healthy(40);
  for (auto& s : e.per_rank[0]) s.rss += 2'000'000'000;
  r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::warn);
  EXPECT_NE(r.summary.find("ranks far apart"), std::string::npos) << r.summary;
  // On CUDA the allocator's bytes are judged, not the resident set.
  e = healthy(40);
  for (auto& rank : e.per_rank)
    for (auto& s : rank) {
      s.cuda_allocated = 1'000'000'000 + 100'000 * s.step;
      s.rss = 500'000'000;
    }
  r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("CUDA allocated"), std::string::npos) << r.summary;
}

// One of each per iteration: each broken order is named with the step, the rank and the counts.
TEST(TrainingJudges, AnIterationOutOfOrderIsNamed) {
  TrainingEvidence e = healthy(20);
  for (auto& s : e.per_rank[0]) s.forwards = s.backwards = 2;  // accumulation: two of each, one step
  auto r = ddp::judge_iteration(e);
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_NE(r.summary.find("up to 2 forwards and backwards (accumulation)"), std::string::npos) << r.summary;

  e = healthy(20);  // optimizer.step() twice per iteration: every other step saw nothing before it
  for (auto& s : e.per_rank[1])
    if (s.step % 2) s.forwards = s.backwards = 0;
  r = ddp::judge_iteration(e);
  EXPECT_EQ(r.status, CheckStatus::fail) << r.summary;
  EXPECT_NE(r.summary.find("optimizer.step() ran 20 times for 10 iterations: 10 step(s) with no forward and no "
                           "backward since the step before (first rank 1, step 1)"),
            std::string::npos)
      << r.summary;

  e = healthy(20);
  e.per_rank[0][5].stale_grads = true;
  e.per_rank[1][3].stale_grads = true;  // the earliest step is named, whichever rank
  r = ddp::judge_iteration(e);
  EXPECT_EQ(r.status, CheckStatus::fail) << r.summary;
  EXPECT_NE(r.summary.find("rank 1, step 3: the first backward found step 2's gradients still there"),
            std::string::npos)
      << r.summary;

  e = healthy(20);
  e.per_rank[0][4].forwards = 0;
  r = ddp::judge_iteration(e);
  EXPECT_NE(r.summary.find("rank 0, step 4: 1 backward(s) and no forward through the DDP model"), std::string::npos)
      << r.summary;

  e = healthy(20);
  for (auto& s : e.per_rank[0]) s.step_before_backward = true;
  r = ddp::judge_iteration(e);
  EXPECT_NE(r.summary.find("rank 0, step 0: optimizer.step() ran after the forward and before its backward"),
            std::string::npos)
      << r.summary;
  e = healthy(20);
  e.per_rank[1][2].outside_ddp = {"9.weight", "9.bias"};
  r = ddp::judge_iteration(e);
  EXPECT_NE(r.summary.find("rank 1, step 2: 9.weight, 9.bias received gradients DDP never allreduces"),
            std::string::npos)
      << r.summary;
  // Step 0 may begin before the hooks: its counts alone break nothing.
  e = healthy(20);
  e.per_rank[0][0].forwards = 0;
  EXPECT_EQ(ddp::judge_iteration(e).status, CheckStatus::pass);
}

// The heap in use counts what is held: a resident set that creeps as allocators keep pages (the false alarm of
// 36-59 KB a step seen on correct scripts) over a flat heap is steady; a heap that grows by a small kept graph each
// step is a leak the resident set would hide.
TEST(TrainingJudges, TheHeapInUseIsJudgedWhereItWasMeasured) {
  TrainingEvidence e = healthy(90);
  for (auto& rank : e.per_rank)
    for (auto& s : rank) {
      s.rss += 49'000 * s.step;
      s.heap = 150'000'000 + (s.step < 3 ? 1'000'000 * s.step : 3'000'000);
    }
  auto r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_NE(r.summary.find("heap in use"), std::string::npos) << r.summary;
  EXPECT_EQ(r.details["ranks"][0]["measure"], "heap");
  for (auto& s : e.per_rank[1]) *s.heap += 4'300 * s.step;  // the creep of correct scripts: no leak
  r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  for (auto& s : e.per_rank[0]) *s.heap += 24'000 * s.step;  // a kept graph holding activations
  r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::fail) << r.summary;
  EXPECT_NE(r.summary.find("rank 0 grows 24 KB per step from step 9 (heap in use +1.9 MB over 81 steps)"),
            std::string::npos)
      << r.summary;
  // A rank whose every step lacks the heap (no mallinfo2) falls back to its resident set, judged with wider marks.
  for (auto& rank : e.per_rank)
    for (auto& s : rank) s.heap.reset();
  r = ddp::judge_memory(e);
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_EQ(r.details["ranks"][0]["measure"], "rss");
}

std::optional<ddp::records::probe_info> probe(int64_t size, std::vector<std::pair<int, std::string>> items) {
  nlohmann::json j = {{"class", "TensorDataset"},
                      {"size", size},
                      {"items", nlohmann::json::array()},
                      {"random_items", nlohmann::json::array()}};
  for (const auto& [i, d] : items) j["items"].push_back({i, d});
  ddp::records::probe_info p;
  std::string err;
  EXPECT_TRUE(ddp::records::read(j, p, err)) << err;
  return p;
}

TEST(DatasetJudge, TheSameContentPassesADifferentItemOrSizeIsNamed) {
  ddp::DatasetEvidence e;
  e.per_rank = {probe(100, {{3, "aa"}, {17, "bb"}}), probe(100, {{3, "aa"}, {17, "bb"}})};
  EXPECT_EQ(ddp::judge_same_dataset(e).status, CheckStatus::pass);
  e.per_rank[1] = probe(100, {{3, "aa"}, {17, "cc"}});
  auto r = ddp::judge_same_dataset(e);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_EQ(r.summary.rfind("sample 17 differs between rank 0 and rank 1", 0), 0u) << r.summary;
  e.per_rank[1] = probe(50, {{3, "aa"}});
  EXPECT_EQ(ddp::judge_same_dataset(e).status, CheckStatus::fail);
  // Items random on every read: nothing compared is no pass.
  e.per_rank = {probe(100, {}), probe(100, {})};
  EXPECT_EQ(ddp::judge_same_dataset(e).status, CheckStatus::skip);
}

TEST(NumericsCauses, NaNOnBothSidesAgreesOnOneSideIsNamed) {
  const double nan = std::nan("");
  EXPECT_TRUE(ddp::compare_values("w", {1, nan, INFINITY}, {1, nan, INFINITY}, 1e-6, 1e-5).ok);
  auto c = ddp::compare_values("w", {1, nan}, {1, 2}, 1e-6, 1e-5);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(c.nonfinite);
}

ddp::NumericsEvidence one_bad_step(ddp::TensorCompare bad) {
  ddp::NumericsEvidence s;
  s.step = 1;
  s.grads = {ddp::compare_values("a", {1, 2}, {1, 2}, 1e-6, 1e-5), bad};
  return s;
}

TEST(NumericsCauses, TheTestedHypothesisIsTheCauseNamed) {
  ddp::TensorCompare bad = ddp::compare_values("b", {3, 4}, {1, 2}, 1e-6, 1e-5);
  bad.piles_up = true;
  auto r = ddp::judge_numerics({one_bad_step(bad)}, 2, 1e-6, 1e-5);
  EXPECT_NE(r.summary.find("optimizer.zero_grad() is not called"), std::string::npos) << r.summary;
  bad.outside_optimizer = true;
  r = ddp::judge_numerics({one_bad_step(bad)}, 2, 1e-6, 1e-5);
  EXPECT_NE(r.summary.find("b is in no optimizer param_group"), std::string::npos) << r.summary;
  // Every reference gradient zero: zeros equal zeros, no pass.
  ddp::NumericsEvidence zero;
  zero.grads = {ddp::compare_values("a", {0, 0}, {0, 0}, 1e-6, 1e-5)};
  EXPECT_EQ(ddp::judge_numerics({zero, zero}, 2, 1e-6, 1e-5).status, CheckStatus::warn);
}

TEST(RankSync, ReplicasThatNeverChangedAreNoPass) {
  std::vector<std::map<int64_t, std::string>> h(2);
  for (int s = -1; s < 5; ++s) h[0][s] = h[1][s] = "same";
  EXPECT_EQ(ddp::check_rank_sync(h).status, CheckStatus::warn);
  h[0][4] = h[1][4] = "moved";
  EXPECT_EQ(ddp::check_rank_sync(h).status, CheckStatus::pass);
}

ddp::CheckpointContents epoch_snapshot() {
  ddp::CheckpointContents c;
  c.file = "snap.pt";
  c.expected = {"param:w", "optimizer.state:w", "epoch", "step", "sampler.position", "rng.torch", "rng.random"};
  c.found = {"param:w", "optimizer.state:w", "epoch", "rng.torch"};
  c.epoch_boundary = true;
  c.rng_untouched = {"rng.random"};
  return c;
}

TEST(CheckpointComplete, ItemsAnEpochBoundaryResumeDoesNotNeedWarnOthersFail) {
  ddp::CheckpointEvidence e;
  e.files = {epoch_snapshot()};
  auto r = ddp::judge_checkpoint_complete(e);
  EXPECT_EQ(r.status, CheckStatus::warn) << r.summary;
  EXPECT_NE(r.summary.find("step (derivable from the epoch at an epoch boundary"), std::string::npos) << r.summary;
  e.files[0].epoch_boundary = false;  // mid-epoch: the step and the position are needed
  r = ddp::judge_checkpoint_complete(e);
  EXPECT_EQ(r.status, CheckStatus::fail) << r.summary;
  EXPECT_NE(r.summary.find("step, sampler.position"), std::string::npos) << r.summary;
  e.files = {epoch_snapshot()};
  e.files[0].rng_untouched.clear();  // the job draws from Python's random: needed
  EXPECT_EQ(ddp::judge_checkpoint_complete(e).status, CheckStatus::fail);
}

// No checkpoint at all: a user's choice (its reason given) warns with the risk; without a reason (a job that must
// save one) it fails.
TEST(CheckpointComplete, NoCheckpointWarnsWithItsRiskWhenItWasTheJobsChoice) {
  ddp::CheckpointEvidence e;
  e.none = "the job saved no checkpoint";
  auto r = ddp::judge_checkpoint_complete(e);
  EXPECT_EQ(r.status, CheckStatus::warn) << r.summary;
  EXPECT_NE(r.summary.find("starts again from its first step"), std::string::npos) << r.summary;
  e.none.clear();
  EXPECT_EQ(ddp::judge_checkpoint_complete(e).status, CheckStatus::fail);
}

ddp::ConsumedBatch batch(int64_t step, int64_t b, std::vector<int64_t> idx, int64_t sampler_epoch) {
  ddp::ConsumedBatch c;
  c.step = step;
  c.batch = b;
  c.indices = std::move(idx);
  if (sampler_epoch >= 0) c.sampler_epoch = sampler_epoch;  // -1: a sampler without an epoch
  return c;
}

TEST(ResumeDataStream, TheSavedEpochTrainedAgainAndSkippedBatchesAreNamed) {
  // Two epochs of two steps: epoch 0 trains [1,2] then [3,4]; epoch 1 [4,1] then [2,3].
  const std::vector<ddp::ConsumedBatch> straight = {batch(0, 0, {1, 2}, 0), batch(1, 1, {3, 4}, 0),
                                                    batch(2, 0, {4, 1}, 1), batch(3, 1, {2, 3}, 1)};
  EXPECT_EQ(ddp::resume_data_stream(straight, {batch(0, 0, {4, 1}, 1)}, 2), "");
  const std::string again = ddp::resume_data_stream(straight, {batch(0, 0, {1, 2}, 0)}, 2);
  EXPECT_NE(again.find("trains on the batches of step 0: the saved epoch's data order is trained again"),
            std::string::npos)
      << again;
  const std::string skips = ddp::resume_data_stream(straight, {batch(0, 0, {2, 3}, 1)}, 2);
  EXPECT_NE(skips.find("it skips the batches of 1 step(s)"), std::string::npos) << skips;
  EXPECT_NE(ddp::resume_data_stream(straight, {batch(0, 0, {9, 9}, 1)}, 2).find("never trained on"), std::string::npos);
  // Resumed at epoch 2 with epoch 0's order: not an off-by-one epoch, a shuffle that restarted with the process.
  std::vector<ddp::ConsumedBatch> three = straight;
  three.push_back(batch(4, 0, {3, 1}, 2));
  three.push_back(batch(5, 1, {4, 2}, 2));
  const std::string restart = ddp::resume_data_stream(three, {batch(0, 0, {1, 2}, -1)}, 4);
  EXPECT_NE(restart.find("the data order of an earlier epoch comes back: the loader's shuffle restarts with the "
                         "process"),
            std::string::npos)
      << restart;
}

TEST(LaunchPort, ALaunchThatPicksNoPortGetsAFreeOne) {
  EXPECT_FALSE(ddp::launch_chooses_port({"torchrun", "--nproc-per-node", "2", "train.py"}, {}));
  EXPECT_TRUE(ddp::launch_chooses_port({"torchrun", "--master-port", "1234", "train.py"}, {}));
  EXPECT_TRUE(ddp::launch_chooses_port({"torchrun", "--master_port=1234", "train.py"}, {}));
  EXPECT_TRUE(ddp::launch_chooses_port({"torchrun", "--standalone", "train.py"}, {}));
  EXPECT_TRUE(ddp::launch_chooses_port({"torchrun", "--rdzv-endpoint", "h:29400", "train.py"}, {}));
  EXPECT_TRUE(ddp::launch_chooses_port({"torchrun", "train.py"}, {{"PET_MASTER_PORT", "1"}}));
}

}  // namespace

namespace {

ddp::records::resume_points resume_point(int after_save, std::vector<std::pair<std::string, std::string>> items) {
  return {after_save, 0, std::move(items)};
}

TEST(ResumePoint, TheFirstItemNotRestoredIsTheCauseNamed) {
  const std::vector<ddp::records::resume_points> straight = {
      resume_point(0, {{"param:w", "a"}, {"optimizer:w.momentum_buffer", "m0"}, {"rng.torch", "r0"}}),
      resume_point(1, {{"param:w", "b"}, {"optimizer:w.momentum_buffer", "m1"}, {"rng.torch", "r1"}})};
  bool compared = false;
  EXPECT_EQ(
      ddp::resume_point_difference(
          straight, {resume_point(0, {{"param:w", "b"}, {"optimizer:w.momentum_buffer", "m1"}, {"rng.torch", "r9"}})},
          1, compared),
      "rng.torch");
  EXPECT_TRUE(compared);
  EXPECT_EQ(ddp::resume_point_difference(straight, {resume_point(0, {{"param:w", "b"}})}, 1, compared),
            "optimizer:w.momentum_buffer (missing after resuming)");
  EXPECT_EQ(ddp::resume_point_difference(straight, {}, 1, compared), "");
  EXPECT_FALSE(compared);

  ddp::ResumeEvidence e;
  e.killed = "killed right after checkpoint 1 (step 20)";
  ddp::RankResume r;
  r.items = 10;
  r.first_difference = "param:w";
  r.difference = "differs";
  e.ranks = {r};
  e.resume_point_compared = true;
  e.first_state_difference = "rng.torch";
  auto v = ddp::judge_resume(e);
  EXPECT_EQ(v.status, CheckStatus::fail);
  EXPECT_NE(v.summary.find("already differs from the straight run's after the checkpoint, first at rng.torch"),
            std::string::npos)
      << v.summary;
  e.first_state_difference.clear();  // resumed equal, parted later
  EXPECT_NE(ddp::judge_resume(e).summary.find("parted after"), std::string::npos);
}

}  // namespace
