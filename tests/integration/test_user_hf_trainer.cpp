// The Hugging Face Trainer, unmodified (tests/python/user_scripts/hf_trainer_job.py, transformers from PyPI in the
// venv), under the venv's real torchrun: its checkpoint-N folders are the checkpoints and its resume is judged like any
// other; its own compute_loss is the reference's loss, so the gradient scale its defaults produce is measured and
// named; a correct configuration passes every check.
#include <gtest/gtest.h>

#include "user_check_support.h"

namespace {
using ddptest::fresh_dir;
using ddptest::user_check::check;
using ddptest::user_check::Checked;
using ddptest::user_check::kScripts;
using ddptest::user_check::torchrun_cmd;
using ddptest::user_check::UserCheck;
using ddptest::user_check::venv_has;

const std::string kHfTrainer = kScripts + "/hf_trainer_job.py";

class HfTrainer : public UserCheck {
 protected:
  void SetUp() override {
    UserCheck::SetUp();
    if (!IsSkipped() && !venv_has(torchrun_, "transformers"))
      GTEST_SKIP() << "the torch venv has no transformers: bash scripts/torchrun_venv.sh installs it";
  }
  std::vector<std::string> job(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--out", fresh_dir(name + "_out")};
    a.insert(a.end(), extra.begin(), extra.end());
    return torchrun_cmd(torchrun_, 2, kHfTrainer, a);
  }
};

// A GPT-2 language model with every default: its head is its token embedding (tied: one parameter under two names,
// stored once by save_pretrained), and the Trainer counts the items of a batch by its own rule (here every label,
// though the shifted loss never predicts the first): the reference weighs what one process of the same Trainer
// computes, and the checkpoint holds the tied parameter once.
TEST_F(HfTrainer, ACorrectTrainerPassesTheWholeLadderResumingFromItsCheckpointFolder) {
  Checked c = check("hf_ok", {"--resume-arg", "--resume {ckpt}"}, job("hf_ok", {"--model", "gpt2"}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  for (const auto& row : c.checks["checks"]) EXPECT_EQ(row["status"], "pass") << row["id"] << ": " << row["summary"];
  EXPECT_NE(c.summary("numerics.reference").find("match a single-rank reference"), std::string::npos)
      << c.summary("numerics.reference");
  EXPECT_NE(c.summary("checkpoint.resume").find("killed right after checkpoint 1 (step 12)"), std::string::npos)
      << c.summary("checkpoint.resume");
}

// With every default of transformers 5, BERT's loss is multiplied by the number of processes while it ignores
// num_items_in_batch; with accumulation the Trainer also leaves the division by the micro-batches to it.
TEST_F(HfTrainer, TheGradientScaleOfItsDefaultsIsNamedWithItsSource) {
  Checked defaults = check("hf_defaults", {"--checks", "numerics.reference"}, job("hf_defaults"), torchrun_);
  EXPECT_EQ(defaults.code, 1) << defaults.output;
  EXPECT_EQ(defaults.status("numerics.reference"), "fail") << defaults.summary("numerics.reference");
  EXPECT_NE(defaults.summary("numerics.reference")
                .find("gradients are 2x the single-process gradient of the same global batch: the world size applied "
                      "twice"),
            std::string::npos)
      << defaults.summary("numerics.reference");
  Checked accumulated = check("hf_accumulate", {"--checks", "numerics.reference,comm.no_sync,train.iteration"},
                              job("hf_accumulate", {"--no-average-tokens", "--plant", "accumulate"}), torchrun_);
  EXPECT_EQ(accumulated.status("numerics.reference"), "fail") << accumulated.summary("numerics.reference");
  EXPECT_NE(accumulated.summary("numerics.reference")
                .find("accumulation over 2 micro-batches whose losses are not divided by 2"),
            std::string::npos)
      << accumulated.summary("numerics.reference");
  EXPECT_EQ(accumulated.status("comm.no_sync"), "pass") << accumulated.summary("comm.no_sync");
  EXPECT_EQ(accumulated.status("train.iteration"), "pass") << accumulated.summary("train.iteration");
}

TEST_F(HfTrainer, SaveOnlyModelIsNamedAsNotResumable) {
  Checked c = check("hf_weights_only", {"--checks", "checkpoint.complete"},
                    job("hf_weights_only", {"--no-average-tokens", "--plant", "save-only-model"}), torchrun_);
  EXPECT_EQ(c.code, 1) << c.output;
  EXPECT_EQ(c.status("checkpoint.complete"), "fail") << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("/checkpoint-12: optimizer.state:"), std::string::npos)
      << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("weights alone: a save for inference, not resumable"),
            std::string::npos)
      << c.summary("checkpoint.complete");
}

// Gradual unfreezing done after the Trainer built DDP and the optimizer: the blocks' gradients are never averaged
// (their clipping norm differs per rank, and so every update) and no optimizer steps them; both named at the step.
TEST_F(HfTrainer, BlocksUnfrozenAfterDdpAndTheOptimizerWereBuiltAreNamed) {
  Checked c = check("hf_unfreeze", {"--checks", "train.iteration,train.learns"},
                    job("hf_unfreeze", {"--model", "gpt2", "--plant", "unfreeze-late"}), torchrun_);
  EXPECT_EQ(c.code, 1) << c.output;
  EXPECT_EQ(c.status("train.iteration"), "fail") << c.summary("train.iteration");
  EXPECT_NE(c.summary("train.iteration").find("step 4: transformer.h.0.ln_1.weight"), std::string::npos)
      << c.summary("train.iteration");
  EXPECT_NE(c.summary("train.iteration").find("required no grad when DDP(...) wrapped the module"), std::string::npos)
      << c.summary("train.iteration");
  EXPECT_EQ(c.status("train.learns"), "fail") << c.summary("train.learns");
  EXPECT_NE(c.summary("train.learns").find("receive gradients from step 4"), std::string::npos)
      << c.summary("train.learns");
}

}  // namespace
