// Run diff, config and timing: the one-variable rule over manifests, stage deltas from traces or the manifest.
// Every check comes with its planted difference: the same assertion on the unchanged pair must come out the other way.
#include "tests/traces/diff/run_diff_support.h"

using namespace run_diff_test;

namespace {

// ---- config ------------------------------------------------------------------------------------------------------

TEST(RunDiffConfig, IdenticalManifestsHaveNoDifferencesButPlantedOnesAreListed) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  // Times, pids, clock offsets and per-rank outcomes differ between any two runs: they are not config differences.
  json m2 = m;
  m2["start_time"] = "2027-01-01T00:00:00Z";
  m2["ranks"][1]["pid"] = 4242;
  m2["ranks"][0]["step_time_median_ms"] = 99.0;
  m2["ranks"][0]["clock"]["offset_ns_start"] = 7;
  write_manifest(b, m2);
  auto d = diff_dirs(a, b);
  EXPECT_TRUE(d.config.empty());
  EXPECT_TRUE(d.distributed_changed.empty());
  EXPECT_TRUE(d.warning.empty());

  // Planted: the learning rate and the per-rank batch shape.
  m2["config"]["lr"] = 0.01;
  m2["ranks"][1]["batch"]["x"]["shape"] = {32, 128};
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  ASSERT_EQ(d.config.size(), 2u);
  EXPECT_EQ(d.config[0].key, "config.lr");
  EXPECT_EQ(d.config[0].a, 0.001);
  EXPECT_EQ(d.config[0].b, 0.01);
  EXPECT_TRUE(d.config[0].variable.empty());
  EXPECT_EQ(d.config[1].key, "ranks.1.batch.x.shape");
  EXPECT_TRUE(d.distributed_changed.empty());  // lr is not a distributed variable
  EXPECT_TRUE(d.warning.empty());
}

TEST(RunDiffConfig, OneDistributedVariableDoesNotWarnTwoDo) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  json m2 = m;
  m2["config"]["batch_size"] = 32;
  write_manifest(b, m2);
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"batch size"});
  EXPECT_TRUE(d.warning.empty());
  EXPECT_EQ(ddp::run_diff_text(d).find("WARNING"), std::string::npos);

  // Planted: a non-distributed option changed too (the seed's rule is one variable at a time, whichever kind).
  m2["config"]["lr"] = 0.002;
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"batch size"});
  EXPECT_NE(d.warning.find("batch size changed together with config.lr"), std::string::npos) << d.warning;

  // Planted: a second distributed variable.
  m2["config"]["workers"] = 4;
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, (std::vector<std::string>{"batch size", "workers"}));
  ASSERT_FALSE(d.warning.empty());
  EXPECT_NE(d.warning.find("batch size"), std::string::npos);
  EXPECT_NE(d.warning.find("workers"), std::string::npos);
  EXPECT_NE(d.warning.find("one variable at a time"), std::string::npos);
  std::string text = ddp::run_diff_text(d);
  EXPECT_NE(text.find("WARNING"), std::string::npos);
  EXPECT_NE(text.find("[workers]"), std::string::npos);
}

TEST(RunDiffConfig, AVariableSeenUnderSeveralKeysCountsOnce) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  json m2 = m;
  // World size shows in world_size and config.nproc; the seed in config.seed and every seeds.* entry.
  m2["world_size"] = 4;
  m2["config"]["nproc"] = 4;
  write_manifest(b, m2);
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.config.size(), 2u);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"world size"});
  EXPECT_TRUE(d.warning.empty());

  m2 = m;
  m2["config"]["seed"] = 1;
  m2["seeds"] = {{"data", 1}, {"weights", 1}, {"sampler", 1}};
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.config.size(), 4u);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"seed"});
  EXPECT_TRUE(d.warning.empty());

  // Planted: the backend and the launch method change together with the seed.
  m2["backend"] = "nccl";
  m2["launch"]["method"] = "torchrun";
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, (std::vector<std::string>{"backend", "seed", "launch method"}));
  EXPECT_NE(d.warning.find("3 distributed variables"), std::string::npos);
}

TEST(RunDiffConfig, EveryNamedDistributedVariableIsRecognised) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  const std::vector<std::pair<std::string, json>> planted = {
      {"/world_size", 4},         {"/backend", "nccl"},       {"/config/batch_size", 16},
      {"/config/accum_steps", 4}, {"/config/amp", "on"},      {"/config/bucket_mb", 1.0},
      {"/config/seed", 3},        {"/launch/method", "srun"}, {"/config/workers", 0}};
  std::set<std::string> seen;
  for (const auto& [ptr, v] : planted) {
    json m2 = m;
    m2[json::json_pointer(ptr)] = v;
    write_manifest(b, m2);
    auto d = diff_dirs(a, b);
    ASSERT_EQ(d.distributed_changed.size(), 1u) << ptr;
    seen.insert(d.distributed_changed[0]);
  }
  EXPECT_EQ(seen.size(), 9u);
}

// ---- timing ------------------------------------------------------------------------------------------------------

TEST(RunDiffTiming, StageDeltasFromTraces) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  write_manifest(a, base_manifest());
  write_manifest(b, base_manifest());
  for (uint32_t r = 0; r < 2; ++r) {
    write_trace(a, r, 2, 10, StageMs{});
    write_trace(b, r, 2, 10, StageMs{});
  }
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.timing.source, "traces");
  const ddp::StageRow* fw = stage_row(d.timing.mean, "forward");
  ASSERT_NE(fw, nullptr);
  EXPECT_NEAR(*fw->per_step_ms.a, 5.0, 1e-6);
  EXPECT_NEAR(*fw->per_step_ms.b - *fw->per_step_ms.a, 0.0, 1e-9);
  EXPECT_EQ(stage_row(d.timing.mean, "wait_comm"), nullptr);

  // Planted: rank 1 of run B has a 3 ms slower backward and 2 ms of exposed communication.
  StageMs slow;
  slow.backward = 13;
  slow.wait_comm = 2;
  write_trace(b, 1, 2, 10, slow);
  d = diff_dirs(a, b);
  const ddp::StageRow* bw = stage_row(d.timing.mean, "backward");
  ASSERT_NE(bw, nullptr);
  EXPECT_NEAR(*bw->per_step_ms.a, 10.0, 1e-6);
  EXPECT_NEAR(*bw->per_step_ms.b, 11.5, 1e-6);  // mean over the two ranks
  const ddp::StageRow* bw1 = stage_row(d.timing.ranks.at(1), "backward");
  const ddp::StageRow* bw0 = stage_row(d.timing.ranks.at(0), "backward");
  EXPECT_NEAR(*bw1->per_step_ms.b - *bw1->per_step_ms.a, 3.0, 1e-6);
  EXPECT_NEAR(*bw0->per_step_ms.b - *bw0->per_step_ms.a, 0.0, 1e-9);
  const ddp::StageRow* wc = stage_row(d.timing.ranks.at(1), "wait_comm");
  ASSERT_NE(wc, nullptr);
  EXPECT_NEAR(*wc->per_step_ms.a, 0.0, 1e-12);  // absent in A: no time there
  EXPECT_NEAR(*wc->per_step_ms.b, 2.0, 1e-6);
  EXPECT_NEAR(*d.timing.ranks.at(1).step_median_ms.b - *d.timing.ranks.at(1).step_median_ms.a, 5.0, 1e-6);
  EXPECT_NEAR(*d.timing.ranks.at(0).step_median_ms.b - *d.timing.ranks.at(0).step_median_ms.a, 0.0, 1e-9);

  json j = ddp::run_diff_json(d);
  bool found = false;
  for (const auto& row : j["timing"]["mean"]["stages_ms_per_step"])
    if (row["stage"] == "backward") {
      found = true;
      EXPECT_NEAR(row["delta"].get<double>(), 1.5, 1e-6);
      EXPECT_NEAR(row["delta_pct"].get<double>(), 15.0, 1e-4);
    }
  EXPECT_TRUE(found);
}

TEST(RunDiffTiming, FallsBackToTheManifestWithoutTraces) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  write_manifest(b, m);
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.timing.source, "manifest");
  EXPECT_TRUE(d.timing.mean.stages.empty());
  EXPECT_NEAR(*d.timing.mean.step_median_ms.a, 8.5, 1e-9);
  EXPECT_NEAR(*d.timing.mean.step_median_ms.b - *d.timing.mean.step_median_ms.a, 0.0, 1e-12);

  // Planted: B's rank 0 was 4 ms slower per step.
  m["ranks"][0]["step_time_median_ms"] = 12.0;
  write_manifest(b, m);
  d = diff_dirs(a, b);
  EXPECT_NEAR(*d.timing.ranks.at(0).step_median_ms.b - *d.timing.ranks.at(0).step_median_ms.a, 4.0, 1e-9);
  EXPECT_NEAR(*d.timing.mean.step_median_ms.b - *d.timing.mean.step_median_ms.a, 2.0, 1e-9);
  EXPECT_FALSE(d.timing.note.empty());
}

}  // namespace
