// The invariants of docs/checks.md on a script written in another style (tests/python/user_scripts/cnn_job.py: a
// plain loop, a CNN with BatchNorm, AdamW with a warm-up, gradient clipping, epoch checkpoints, a peek at the first
// batch before each pass as PyTorch's DDP tutorial does) under the venv's real torchrun, no line of ddp_profile in
// it: correct, every check passes; each invariant broken alone is named by the check that owns it, with its key.
#include <gtest/gtest.h>

#include "user_check_support.h"

namespace {
using ddptest::fresh_dir;
using ddptest::user_check::check;
using ddptest::user_check::Checked;
using ddptest::user_check::kScripts;
using ddptest::user_check::torchrun_cmd;
using ddptest::user_check::UserCheck;

const std::string kCnn = kScripts + "/cnn_job.py";

TEST_F(UserCheck, ACnnWithBatchNormWarmupAndAPeekAtEachPassPassesEveryCheck) {
  const std::string out = fresh_dir("cnn_out");
  Checked c =
      check("cnn_ok", {"--resume-arg", "--resume {ckpt}"}, torchrun_cmd(torchrun_, 2, kCnn, {"--out", out}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  for (const auto& row : c.checks["checks"]) {
    const std::string id = row["id"];
    const std::string want = id == "numerics.reference"    ? "skip"  // no loss function: no reference
                             : id == "checkpoint.complete" ? "warn"  // step and RNGs unsaved, not needed here
                                                           : "pass";
    EXPECT_EQ(row["status"], want) << id << ": " << row["summary"];
  }
  EXPECT_NE(c.summary("data.shard_rule").find("exactly as DistributedSampler's rule says"), std::string::npos)
      << c.summary("data.shard_rule");
  EXPECT_NE(c.summary("numerics.rank_sync").find("buffers, optimizer, scheduler and sampler settings equal too"),
            std::string::npos)
      << c.summary("numerics.rank_sync");
  EXPECT_NE(c.summary("memory.steady").find("heap in use"), std::string::npos) << c.summary("memory.steady");
}

struct Broken {
  const char* plant;
  const char* check_id;
  const char* names;  // what the failing check's summary must say
};

TEST_F(UserCheck, EachBrokenInvariantIsNamedWithItsKey) {
  const std::vector<Broken> cases = {
      {"bn-unsynced", "numerics.rank_sync", "buffer/1.running_mean: "},
      {"bn-unsynced", "numerics.rank_sync", "DDP(broadcast_buffers=False) without SyncBatchNorm"},
      {"lr-per-rank", "numerics.rank_sync",
       "optimizer/param_groups[0].lr: 0.0001 on rank 0, 0.0002 on rank 1 at start (after the initial broadcast); rank "
       "1's "
       "parameters then differ from rank 0's after optimizer step 0"},
      {"seed-per-rank", "data.shard_rule",
       "the ranks' samplers are seeded differently (seed 0 on rank 0, 1 on rank 1)"},
      {"seed-per-rank", "data.shard_rule", "never read"},
      {"double-step", "train.iteration", "optimizer.step() ran 60 times for 30 iterations"},
      {"no-zero-grad", "train.iteration", "step 1: the first backward found step 0's gradients still there"},
      {"head-after-ddp", "train.iteration",
       "step 0: 9.weight, 9.bias received gradients DDP never allreduces: not among the parameters DDP registered"},
      {"head-after-ddp", "numerics.rank_sync", "rank 1's parameters differ from rank 0's after optimizer step 0"},
  };
  std::map<std::string, Checked> runs;  // one ladder run per plant
  for (const Broken& b : cases) {
    if (!runs.count(b.plant))
      runs[b.plant] = check(
          std::string("cnn_") + b.plant,
          {"--checks", "data.shard_rule,train.iteration,numerics.rank_sync,memory.steady"},
          torchrun_cmd(torchrun_, 2, kCnn,
                       {"--out", fresh_dir(std::string("cnn_out_") + b.plant), "--epochs", "1", "--plant", b.plant}),
          torchrun_);
    const Checked& c = runs[b.plant];
    EXPECT_EQ(c.code, 1) << b.plant << "\n" << c.output;
    EXPECT_EQ(c.status(b.check_id), "fail") << b.plant << ": " << c.summary(b.check_id);
    EXPECT_NE(c.summary(b.check_id).find(b.names), std::string::npos) << b.plant << ": " << c.summary(b.check_id);
  }
  // Each fault breaks its own invariant, not the unrelated ones.
  for (const auto& [plant, c] : runs) {
    EXPECT_EQ(c.status("memory.steady"), "pass") << plant << ": " << c.summary("memory.steady");
    if (plant == "double-step" || plant == "no-zero-grad") {
      EXPECT_EQ(c.status("data.shard_rule"), "pass") << plant << ": " << c.summary("data.shard_rule");
    }
  }
}

// memory.steady on correct scripts of every style over at least 80 optimizer steps: the heap they settle into is no
// leak (the resident set crept 36-59 KB a step on such scripts and failed them).
TEST_F(UserCheck, MemoryIsSteadyOnCorrectScriptsOfEveryStyle) {
  struct Style {
    const char* name;
    std::string script;
    std::vector<std::string> args;
    const char* needs;
  };
  const std::vector<Style> styles = {
      {"cnn_workers", kCnn, {"--out", fresh_dir("mem_cnn"), "--workers", "2"}, nullptr},
      {"lightning",
       kScripts + "/lightning_job.py",
       {"--epochs", "6", "--ckpt-dir", fresh_dir("mem_light")},
       "lightning"},
      {"accelerate",
       kScripts + "/accelerate_job.py",
       {"--epochs", "10", "--ckpt-dir", fresh_dir("mem_acc")},
       "accelerate"},
      {"hf_trainer",
       kScripts + "/hf_trainer_job.py",
       {"--out", fresh_dir("mem_hf"), "--epochs", "4", "--no-average-tokens"},
       "transformers"},
  };
  for (const Style& s : styles) {
    if (s.needs && !ddptest::user_check::venv_has(torchrun_, s.needs)) continue;
    Checked c = check(std::string("mem_") + s.name, {"--checks", "memory.steady"},
                      torchrun_cmd(torchrun_, 2, s.script, s.args), torchrun_);
    EXPECT_EQ(c.status("memory.steady"), "pass") << s.name << ": " << c.summary("memory.steady");
    // Counted as tensors too: the companion's own bookkeeping is no part of what it counts.
    EXPECT_NE(c.summary("memory.steady").find("live tensors steady"), std::string::npos) << s.name;
    const auto& rank0 = c.checks["checks"][0]["details"]["ranks"][0];
    EXPECT_EQ(rank0["measure"], "heap") << s.name;
    EXPECT_GE(rank0["steps"].get<int>() + 8, 80) << s.name << ": too short a run to say";
  }
}

}  // namespace
