// `ddp_profile --check` end to end: the ladder passes on the default job, and each check fails on its planted fault.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;
using ddptest::fresh_dir;
using ddptest::kExe;
using ddptest::read_json;

nlohmann::json checks_of(const std::string& dir) { return read_json(dir + "/checks.json"); }

TEST(Check, TheWholeLadderPassesOnTheDefaultJob) {
  std::string d = fresh_dir("ladder");
  auto r = ddptest::run({kExe, "--check", "--out", d}, d + ".log", 600);
  EXPECT_EQ(r.code, 0) << r.output;
  auto j = checks_of(d);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  std::vector<std::string> ids;
  for (const auto& c : j["checks"]) {
    ids.push_back(c["id"]);
    EXPECT_EQ(c["status"], "pass") << c["id"] << ": " << c["summary"];
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"env.manifest", "data.shard_rule", "numerics.reference",
                                           "numerics.rank_sync", "memory.steady", "comm.no_sync", "checkpoint.complete",
                                           "checkpoint.resume", "faults.exit"}));
  EXPECT_TRUE(fs::exists(d + "/main/verify/rank0.summaries.jsonl")) << "per-layer summaries are kept";
  // Checkpoints and dumps must be what torch.load(path, weights_only=True) accepts (checked structurally: no torch
  // in this environment).
  auto py =
      ddptest::run({"/usr/bin/env", "python3", std::string(DDP_SOURCE_DIR) + "/tests/python/weights_only_globals.py",
                    d + "/main/checkpoints/step2/rank0.pt", d + "/main/checkpoints/step2/rank1.pt",
                    d + "/main/verify/rank0_step0.pt"},
                   d + ".py.log", 60);
  EXPECT_EQ(py.code, 0) << py.output;
}

struct Planted {
  const char* name;
  const char* check;
  std::vector<std::string> options;
  const char* expect_in_summary;
};

class PlantedFault : public ::testing::TestWithParam<Planted> {};

TEST_P(PlantedFault, ItsCheckFailsAndSaysWhy) {
  const Planted& p = GetParam();
  std::string d = fresh_dir(p.name);
  std::vector<std::string> args = {kExe, "--check", "--checks", p.check, "--out", d};
  args.insert(args.end(), p.options.begin(), p.options.end());
  auto r = ddptest::run(args, d + ".log", 600);
  EXPECT_EQ(r.code, 1) << r.output;
  auto j = checks_of(d);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  ASSERT_EQ(j["checks"].size(), 1u);
  EXPECT_EQ(j["checks"][0]["status"], "fail");
  std::string summary = j["checks"][0]["summary"];
  EXPECT_NE(summary.find(p.expect_in_summary), std::string::npos) << summary;
}

INSTANTIATE_TEST_SUITE_P(
    Ladder, PlantedFault,
    ::testing::Values(
        Planted{"broken_shard",
                "data.shard_rule",
                {"--plant", "broken-shard", "--max-steps", "10"},
                "rank 0 and rank 1 read"},
        Planted{"no_set_epoch", "data.shard_rule", {"--plant", "no-set-epoch", "--dataset-size", "2000"}, "set_epoch"},
        Planted{"sum_loss", "numerics.reference", {"--loss-reduction", "sum", "--max-steps", "5"}, "sum-reduced loss"},
        Planted{"batchnorm", "numerics.reference", {"--model", "mlp-bn", "--max-steps", "5"}, "BatchNorm"},
        Planted{"skip_allreduce",
                "numerics.rank_sync",
                {"--plant", "skip-allreduce", "--max-steps", "5"},
                "differ from rank 0"},
        Planted{"sync_every_step",
                "comm.no_sync",
                {"--accum-steps", "4", "--sync-every-step", "--max-steps", "5"},
                "no_sync was not in effect"},
        Planted{"ckpt_no_rng", "checkpoint.complete", {"--plant", "ckpt-no-rng", "--max-steps", "5"}, "rng.torch_cpu"},
        Planted{"ckpt_no_step", "checkpoint.resume", {"--plant", "ckpt-no-step"}, "has no 'step'"},
        Planted{"keep_graphs", "memory.steady", {"--plant", "keep-graphs"}, "per step from step"}),
    [](const ::testing::TestParamInfo<Planted>& i) { return std::string(i.param.name); });

TEST(Check, ImageDatasetPassesTheSamplerAndNumericsChecks) {
  // The reference re-reads the same files and replays the same crops (seeded by seed, epoch and index).
  std::string d = fresh_dir("images");
  auto r = ddptest::run({kExe, "--check", "--checks", "data.shard_rule,numerics.reference,numerics.rank_sync", "--out",
                         d, "--dataset", "images", "--dataset-size", "256", "--batch-size", "16", "--max-steps", "4"},
                        d + ".log", 600);
  EXPECT_EQ(r.code, 0) << r.output;
  // The manifest's expected batch is the image shape [B, C, H, W] the ranks saw, not [B, --features].
  auto m = read_json(d + "/main/manifest.json");
  EXPECT_EQ(m["expected_batch"]["x"]["shape"].size(), 4u) << m["expected_batch"].dump();
  EXPECT_EQ(m["expected_batch"]["x"]["shape"], m["ranks"][0]["batch"]["x"]["shape"]);
}

TEST(Check, AccumulationPassesNoSync) {
  std::string d = fresh_dir("accum");
  auto r = ddptest::run({kExe, "--check", "--checks", "comm.no_sync,numerics.reference,data.shard_rule", "--out", d,
                         "--accum-steps", "4", "--bucket-mb", "0.1", "--max-steps", "6"},
                        d + ".log", 600);
  EXPECT_EQ(r.code, 0) << r.output;
}
}  // namespace

namespace {
TEST(Check, TorchScriptModelPassesNumericsAndCheckpoints) {
  // A user's model file, written by the TorchScript compiler (tests/tools/make_script_model.cpp).
  std::string d = fresh_dir("script");
  std::string model = d + ".pt";
  auto made = ddptest::run({DDP_MAKE_SCRIPT_MODEL_EXE, model}, d + ".make.log", 120);
  ASSERT_EQ(made.code, 0) << made.output;
  auto r = ddptest::run({kExe, "--check", "--checks", "numerics.reference,numerics.rank_sync,checkpoint.complete",
                         "--out", d, "--model", model, "--max-steps", "5"},
                        d + ".log", 600);
  EXPECT_EQ(r.code, 0) << r.output;
  auto j = checks_of(d);
  ASSERT_FALSE(j.is_discarded());
  for (const auto& c : j["checks"]) EXPECT_EQ(c["status"], "pass") << c["id"] << ": " << c["summary"];
}

// A model with Dropout: ranks and the single-process reference draw different masks, so comparing them as they are
// is meaningless (it was a false "fail ... activations first diverge at layer output"). The verified steps run with
// the Dropout modules off on both sides, the check says so, and a real fault in such a model still fails.
TEST(Check, DropoutModelIsComparedWithDropoutOffAndAFaultStillFails) {
  std::string d = fresh_dir("dropout");
  std::string model = d + ".pt";
  auto made = ddptest::run({DDP_MAKE_SCRIPT_MODEL_EXE, model, "--dropout"}, d + ".make.log", 120);
  ASSERT_EQ(made.code, 0) << made.output;
  auto r = ddptest::run({kExe, "--check", "--checks", "numerics.reference,numerics.rank_sync", "--out", d, "--model",
                         model, "--max-steps", "5"},
                        d + ".log", 600);
  EXPECT_EQ(r.code, 0) << r.output;
  auto j = checks_of(d);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  ASSERT_EQ(j["checks"][0]["id"], "numerics.reference");
  EXPECT_EQ(j["checks"][0]["status"], "pass") << j["checks"][0]["summary"];
  EXPECT_NE(j["checks"][0]["summary"].get<std::string>().find("1 Dropout module(s) off"), std::string::npos)
      << j["checks"][0]["summary"];

  // Planted: the ranks sum their loss where the reference means it.
  r = ddptest::run({kExe, "--check", "--checks", "numerics.reference", "--out", d + "-sum", "--model", model,
                    "--max-steps", "5", "--loss-reduction", "sum"},
                   d + "-sum.log", 600);
  EXPECT_EQ(r.code, 1) << r.output;
  auto bad = checks_of(d + "-sum");
  ASSERT_FALSE(bad.is_discarded()) << r.output;
  EXPECT_EQ(bad["checks"][0]["status"], "fail") << bad["checks"][0]["summary"];
}
}  // namespace
