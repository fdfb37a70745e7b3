// The scripts users have, with no ddp_profile line (docs/python.md "Four ways in"): an unmodified torchrun script,
// PyTorch Lightning and Hugging Face accelerate, under the venv's real packages. Each passes the ladder as it is, and
// a planted mistake in each is named by the check that owns it; --record analyses each. The Lightning and accelerate
// tests skip, saying so, where the venv lacks them (scripts/torchrun_venv.sh installs both).
#include <gtest/gtest.h>

#include "user_check_support.h"

namespace {
using ddptest::fresh_dir;
using ddptest::user_check::check;
using ddptest::user_check::Checked;
using ddptest::user_check::companion_env;
using ddptest::user_check::kScripts;
using ddptest::user_check::torchrun_cmd;
using ddptest::user_check::UserCheck;
using ddptest::user_check::venv_has;

const std::string kUnmodified = kScripts + "/unmodified_job.py", kLightning = kScripts + "/lightning_job.py",
                  kAccelerate = kScripts + "/accelerate_job.py";

void expect_all_pass_but(const Checked& c, const std::map<std::string, std::string>& others) {
  for (const auto& r : c.checks.value("checks", nlohmann::json::array())) {
    const std::string id = r["id"];
    const auto o = others.find(id);
    EXPECT_EQ(r["status"], o == others.end() ? "pass" : o->second) << id << ": " << r["summary"];
  }
}

class Frameworks : public UserCheck {
 protected:
  void need(const char* module) {
    if (!venv_has(torchrun_, module))
      GTEST_SKIP() << "the torch venv has no " << module << ": bash scripts/torchrun_venv.sh installs it";
  }
};

TEST_F(UserCheck, AnUnmodifiedScriptPassesTheWholeLadderAndIsToldHowToGiveItsLoss) {
  Checked c =
      check("unmodified_ok", {"--resume-arg", "--resume {ckpt}"},
            torchrun_cmd(torchrun_, 2, kUnmodified, {"--snapshot", fresh_dir("unmodified_snap.pt")}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  // Epoch-end snapshots without the step: derivable there, said as a warning. No loss function known: a skip that
  // says how to give one, never a pass.
  expect_all_pass_but(c, {{"checkpoint.complete", "warn"}, {"numerics.reference", "skip"}});
  EXPECT_NE(c.summary("numerics.reference").find("ddp_profile.attach(model, optimizer, loss_fn="), std::string::npos)
      << c.summary("numerics.reference");
  EXPECT_NE(c.summary("checkpoint.resume").find("equal the straight run's bit for bit"), std::string::npos)
      << c.summary("checkpoint.resume");
}

// The README's advice taken literally: the attach line after DDP(...) for the loss, the loop and torch.save left as
// they are. Explicit attach is the automatic companion plus the loss: every check the unmodified script passes still
// passes (the loader and the snapshots are still found), and the single-process reference now runs.
TEST_F(UserCheck, TheAttachLineAloneKeepsEveryCheckAndAddsTheReference) {
  Checked c = check("unmodified_attach", {"--resume-arg", "--resume {ckpt}"},
                    torchrun_cmd(torchrun_, 2, kUnmodified, {"--snapshot", fresh_dir("attach_snap.pt"), "--attach"}),
                    torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  expect_all_pass_but(c, {{"checkpoint.complete", "warn"}});
  EXPECT_NE(c.summary("numerics.reference").find("match"), std::string::npos) << c.summary("numerics.reference");
}

TEST_F(UserCheck, AnUnmodifiedScriptsMistakesAreNamed) {
  Checked epoch =
      check("unmodified_no_set_epoch", {"--checks", "data.shard_rule"},
            torchrun_cmd(torchrun_, 2, kUnmodified, {"--snapshot", fresh_dir("u1.pt"), "--plant", "no-set-epoch"}),
            torchrun_);
  EXPECT_EQ(epoch.code, 1) << epoch.output;
  EXPECT_EQ(epoch.status("data.shard_rule"), "fail") << epoch.summary("data.shard_rule");
  EXPECT_NE(epoch.summary("data.shard_rule").find("set_epoch was not applied"), std::string::npos)
      << epoch.summary("data.shard_rule");
  // The DDP tutorial's snapshot: weights and epoch only; SGD's momentum restarts from zero on resume.
  Checked snap =
      check("unmodified_tutorial_snapshot", {"--checks", "checkpoint.complete"},
            torchrun_cmd(torchrun_, 2, kUnmodified, {"--snapshot", fresh_dir("u2.pt"), "--plant", "tutorial-snapshot"}),
            torchrun_);
  EXPECT_EQ(snap.code, 1) << snap.output;
  EXPECT_EQ(snap.status("checkpoint.complete"), "fail") << snap.summary("checkpoint.complete");
  EXPECT_NE(snap.summary("checkpoint.complete").find("optimizer.state:0.weight"), std::string::npos)
      << snap.summary("checkpoint.complete");
  if (!venv_has(torchrun_, "safetensors")) {
    std::cout << "[ SKIPPED part ] a safetensors snapshot: the venv has no safetensors\n";
    return;
  }
  // The weights alone, through safetensors: found as the checkpoint, and what it lacks named.
  const std::string st = fresh_dir("u3.safetensors");
  Checked weights =
      check("unmodified_safetensors", {"--checks", "checkpoint.complete"},
            torchrun_cmd(torchrun_, 2, kUnmodified, {"--snapshot", st, "--plant", "safetensors-weights"}), torchrun_);
  EXPECT_EQ(weights.code, 1) << weights.output;
  EXPECT_EQ(weights.status("checkpoint.complete"), "fail") << weights.summary("checkpoint.complete");
  EXPECT_NE(weights.summary("checkpoint.complete").find(st), std::string::npos)
      << weights.summary("checkpoint.complete");
  EXPECT_NE(weights.summary("checkpoint.complete").find("optimizer.state:0.weight"), std::string::npos)
      << weights.summary("checkpoint.complete");
  EXPECT_NE(weights.summary("checkpoint.complete").find("weights alone"), std::string::npos)
      << weights.summary("checkpoint.complete");
}

TEST_F(Frameworks, LightningUnderTorchrunPassesTheWholeLadderWithTrainingStepAsTheLoss) {
  need("lightning");
  Checked c = check("lightning_ok", {"--resume-arg", "--resume {ckpt}"},
                    torchrun_cmd(torchrun_, 2, kLightning, {"--ckpt-dir", fresh_dir("lightning_ckpts")}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  // Lightning saves no RNG state; this model never draws from it: said, not needed.
  expect_all_pass_but(c, {{"checkpoint.complete", "warn"}});
  EXPECT_NE(c.summary("checkpoint.complete").find("epoch=0-step=16.ckpt"), std::string::npos)
      << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("numerics.reference").find("single-rank reference"), std::string::npos);
}

TEST_F(Frameworks, LightningStartsItsOwnRanksAndAccumulatesAndItsMistakeIsNamed) {
  need("lightning");
  const std::string py = std::filesystem::path(torchrun_).parent_path() / "python";
  // `python train.py`: Lightning starts rank 1 itself; accumulate_grad_batches=2 runs under no_sync.
  Checked own =
      check("lightning_spawns", {"--checks", "env.manifest,data.shard_rule,numerics.reference,comm.no_sync"},
            {py, kLightning, "--ckpt-dir", fresh_dir("lightning_spawn_ckpts"), "--plant", "accumulate"}, torchrun_);
  ASSERT_EQ(own.code, 0) << own.output;
  expect_all_pass_but(own, {});
  EXPECT_NE(own.summary("comm.no_sync").find("on their last micro-step"), std::string::npos)
      << own.summary("comm.no_sync");
  Checked plain = check(
      "lightning_no_sampler", {"--checks", "data.shard_rule"},
      torchrun_cmd(torchrun_, 2, kLightning, {"--ckpt-dir", fresh_dir("l2"), "--plant", "no-distributed-sampler"}),
      torchrun_);
  EXPECT_EQ(plain.code, 1) << plain.output;
  EXPECT_EQ(plain.status("data.shard_rule"), "fail") << plain.summary("data.shard_rule");
  EXPECT_NE(plain.summary("data.shard_rule").find("use_distributed_sampler=True"), std::string::npos)
      << plain.summary("data.shard_rule");
}

TEST_F(Frameworks, AccelerateWithAccumulationPassesTheWholeLadder) {
  need("accelerate");
  Checked c = check("accelerate_ok", {"--resume-arg", "--resume {ckpt}"},
                    torchrun_cmd(torchrun_, 2, kAccelerate, {"--ckpt-dir", fresh_dir("accelerate_ckpts")}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  expect_all_pass_but(c, {{"checkpoint.complete", "warn"}, {"numerics.reference", "skip"}});
  EXPECT_NE(c.summary("data.shard_rule").find("shard with BatchSamplerShard"), std::string::npos)
      << c.summary("data.shard_rule");
  EXPECT_NE(c.summary("train.schedule").find("once per process (2) at each optimizer step"), std::string::npos)
      << c.summary("train.schedule");
  EXPECT_NE(c.summary("comm.no_sync").find("on their last micro-step"), std::string::npos) << c.summary("comm.no_sync");
}

TEST_F(Frameworks, AcceleratesMistakesAreNamed) {
  need("accelerate");
  Checked loader =
      check("accelerate_unprepared", {"--checks", "data.shard_rule"},
            torchrun_cmd(torchrun_, 2, kAccelerate, {"--ckpt-dir", fresh_dir("a1"), "--plant", "unprepared-loader"}),
            torchrun_);
  EXPECT_EQ(loader.code, 1) << loader.output;
  EXPECT_EQ(loader.status("data.shard_rule"), "fail") << loader.summary("data.shard_rule");
  EXPECT_NE(loader.summary("data.shard_rule").find("give the loader to accelerator.prepare"), std::string::npos)
      << loader.summary("data.shard_rule");
  Checked shuffle =
      check("accelerate_unseeded", {"--checks", "checkpoint.resume", "--resume-arg", "--resume {ckpt}"},
            torchrun_cmd(torchrun_, 2, kAccelerate, {"--ckpt-dir", fresh_dir("a2"), "--plant", "unseeded-shuffle"}),
            torchrun_);
  EXPECT_EQ(shuffle.code, 1) << shuffle.output;
  EXPECT_EQ(shuffle.status("checkpoint.resume"), "fail") << shuffle.summary("checkpoint.resume");
  EXPECT_NE(shuffle.summary("checkpoint.resume").find("shuffle restarts with the process"), std::string::npos)
      << shuffle.summary("checkpoint.resume");
}

TEST_F(Frameworks, AccelerateLaunchStartsTheRanks) {
  need("accelerate");
  const std::string accelerate = std::filesystem::path(torchrun_).parent_path() / "accelerate";
  // accelerate 1.15's multi-process launcher (torchrun inside; `--cpu --num_processes 2` would start one process);
  // the script's Accelerator(cpu=True) trains on the CPU over Gloo.
  Checked c = check("accelerate_launch", {"--checks", "env.manifest,data.shard_rule,numerics.rank_sync"},
                    {accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port",
                     std::to_string(ddptest::free_port()), kAccelerate, "--ckpt-dir", fresh_dir("a3")},
                    torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  expect_all_pass_but(c, {});
}

// --record: one profiler cycle per rank, stepped at the optimizer steps the companion found, analysed.
TEST_F(Frameworks, RecordProfilesEachWayInAndAnalysesIt) {
  struct Way {
    const char* name;
    std::string script;
    const char* module;
    const char* output_option;  // where the script writes its checkpoints
  };
  for (const Way& w :
       {Way{"unmodified", kUnmodified, "torch", "--snapshot"}, Way{"lightning", kLightning, "lightning", "--ckpt-dir"},
        Way{"accelerate", kAccelerate, "accelerate", "--ckpt-dir"}}) {
    if (!venv_has(torchrun_, w.module)) {
      std::cout << "[ SKIPPED part ] --record of " << w.name << ": the venv has no " << w.module << "\n";
      continue;
    }
    const std::string out = fresh_dir(std::string("record_") + w.name);
    std::vector<std::string> args = {ddptest::kExe, "--record", "--out", out, "--"};
    for (const auto& a : torchrun_cmd(torchrun_, 2, w.script, {w.output_option, out + "_ckpt"})) args.push_back(a);
    auto r = ddptest::run(args, out + ".log", 600, companion_env(torchrun_));
    EXPECT_EQ(r.code, 0) << w.name << ": " << r.output;
    EXPECT_TRUE(std::filesystem::exists(out + "/rank1.pt.trace.json")) << w.name;
    EXPECT_NE(r.output.find("verdict:"), std::string::npos) << w.name << ": " << r.output;
    // accelerate accumulates under no_sync: a user's trace carries no micro-step index, and is not flagged for it.
    EXPECT_EQ(r.output.find("sync_every_micro_step"), std::string::npos) << w.name << ": " << r.output;
  }
}

}  // namespace

// A language model whose head is its token embedding (one parameter under two names): in a plain script that stores
// it once, under the embedding's name, as save_pretrained does, and in a LightningModule (whose checkpoint keeps
// both names, one tensor). The reference trains it as autograd does (one gradient, summed over both uses), the
// checkpoint is complete with the tied name once, and the resume is exact.
TEST_F(Frameworks, TiedWeightsAreOneParameterInAPlainScriptAndInLightning) {
  need("lightning");
  const std::string checks = "numerics.reference,numerics.rank_sync,train.learns,checkpoint.complete,checkpoint.resume";
  Checked plain = check(
      "tied_plain", {"--checks", checks, "--resume-arg", "--resume {ckpt}"},
      torchrun_cmd(torchrun_, 2, kScripts + "/tied_lm_job.py", {"--ckpt", fresh_dir("tied_plain.pt"), "--attach"}),
      torchrun_);
  Checked light =
      check("tied_lightning", {"--checks", checks, "--resume-arg", "--resume {ckpt}"},
            torchrun_cmd(torchrun_, 2, kLightning, {"--model", "lm", "--ckpt-dir", fresh_dir("tied_lightning_ckpts")}),
            torchrun_);
  for (const Checked* c : {&plain, &light}) {
    EXPECT_EQ(c->code, 0) << c->output;
    for (const char* id : {"numerics.reference", "numerics.rank_sync", "train.learns", "checkpoint.resume"})
      EXPECT_EQ(c->status(id), "pass") << id << ": " << c->summary(id);
    // Epoch-end saves without the sampler's position or an RNG never drawn from: said, not needed; never the head.
    EXPECT_NE(c->status("checkpoint.complete"), "fail") << c->summary("checkpoint.complete");
    EXPECT_EQ(c->summary("checkpoint.complete").find("head.weight"), std::string::npos)
        << c->summary("checkpoint.complete");
  }
}
