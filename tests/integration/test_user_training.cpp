// Whether the training is right (docs/checks.md): scripts in styles of their own under the venv's real torchrun pass
// as they are, and each silent error planted alone (tests/python/user_scripts/loop_job.py, trainer_job.py) is named
// at its cause by the check that owns it. Also: the ladder's launches never collide on a rendezvous port.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "user_check_support.h"

namespace {
using ddptest::fresh_dir;
using ddptest::user_check::check;
using ddptest::user_check::Checked;
using ddptest::user_check::kScripts;
using ddptest::user_check::torchrun_cmd;
using ddptest::user_check::UserCheck;

const std::string kLoop = kScripts + "/loop_job.py", kTrainer = kScripts + "/trainer_job.py";
const std::string kTrainingChecks =
    "data.same_dataset,train.learns,numerics.finite,train.mode,train.schedule,train.iteration,numerics.reference,"
    "numerics.rank_sync,memory.steady";

// It also gathers each step's detached output for an epoch-end accuracy, released at the epoch's end: live tensors
// that grow within an epoch and fall at its end are no leak.
TEST_F(UserCheck, ALoopWithAccumulationDropoutAndMidEpochCheckpointsPassesEveryCheck) {
  const std::string ckpt = fresh_dir("loop_ckpt.pt");
  Checked c =
      check("loop_ok",
            {"--resume-arg", "--resume {ckpt}", "--checks",
             "env.manifest,data.shard_rule,comm.no_sync,checkpoint.complete,checkpoint.resume," + kTrainingChecks},
            torchrun_cmd(torchrun_, 2, kLoop, {"--ckpt", ckpt, "--epoch-metric"}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  for (const char* id : {"env.manifest", "data.shard_rule", "data.same_dataset", "train.learns", "numerics.finite",
                         "train.mode", "train.schedule", "train.iteration", "numerics.reference", "numerics.rank_sync",
                         "memory.steady", "comm.no_sync", "checkpoint.resume"})
    EXPECT_EQ(c.status(id), "pass") << id << ": " << c.summary(id);
  // It saves the global step, not the sampler position, and never draws from Python's random: said, not failed.
  EXPECT_EQ(c.status("checkpoint.complete"), "warn") << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("sampler.position (derivable from the global step"),
            std::string::npos)
      << c.summary("checkpoint.complete");
}

TEST_F(UserCheck, ATrainerClassWithEpochSnapshotsPassesTheWholeLadder) {
  Checked c = check("trainer_ok", {"--resume-arg", "--resume {ckpt}"},
                    torchrun_cmd(torchrun_, 2, kTrainer, {"--snapshot", fresh_dir("trainer_snap.pt")}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  for (const auto& r : c.checks["checks"]) {
    if (r["id"] == "checkpoint.complete") continue;
    EXPECT_EQ(r["status"], "pass") << r["id"] << ": " << r["summary"];
  }
  // No step or sampler position in an epoch-end snapshot: derivable at an epoch boundary, a warning saying when not.
  EXPECT_EQ(c.status("checkpoint.complete"), "warn") << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("step (derivable from the epoch at an epoch boundary"),
            std::string::npos)
      << c.summary("checkpoint.complete");
}

struct Silent {
  const char* plant;
  const char* check_id;
  const char* names;  // what the failing check's summary must say
};
std::vector<std::string> plant_args(const std::string& plant) { return {"--plant", plant}; }

TEST_F(UserCheck, EverySilentErrorIsNamedAtItsCause) {
  const std::vector<Silent> errors = {
      {"single-logit", "train.learns", "the loss does not depend on the parameters"},
      {"replaced-layer", "train.learns", "5.weight, 5.bias require grad but are in no optimizer param_group"},
      {"replaced-layer", "numerics.reference", "5.weight is in no optimizer param_group"},
      {"no-zero-grad", "numerics.reference", "optimizer.zero_grad() is not called"},
      {"no-zero-grad", "train.iteration", "the first backward found step 0's gradients still there"},
      {"eval-mode", "train.mode", "model in eval mode (model.train() not called after model.eval()?): 2 (Dropout)"},
      {"rank-split", "data.same_dataset", "differs between rank 0 and rank 1: each rank builds its own dataset"},
      {"nan", "numerics.finite", "the forward output is not finite, first at layer"},
      {"sched-per-micro", "train.schedule", "scheduler.step() runs 2 times per optimizer step"},
      {"leak", "memory.steady", "keeps autograd graphs alive"},
      {"leak", "memory.steady", "the largest graph held at global `running`"},
      {"leak-outputs", "memory.steady", "keeps autograd graphs alive"},
      {"leak-outputs", "memory.steady", "held in a list at global `kept`"},
      {"leak-cache", "memory.steady", "live tensors grow 2.0 per step"},
      {"leak-cache", "memory.steady", "held in a dict at global `cache`"},
      {"unfreeze-late", "train.iteration",
       "0.weight, 0.bias received gradients DDP never allreduces: they required no "
       "grad when DDP(...) wrapped the module"},
      {"unfreeze-late", "train.learns", "0.weight, 0.bias receive gradients from step 5"},
  };
  std::map<std::string, Checked> runs;  // one ladder run per plant, every training check judged on it
  for (const Silent& e : errors) {
    if (!runs.count(e.plant))
      runs[e.plant] = check(std::string("silent_") + e.plant, {"--checks", kTrainingChecks},
                            torchrun_cmd(torchrun_, 2, kLoop, plant_args(e.plant)), torchrun_);
    const Checked& c = runs[e.plant];
    EXPECT_EQ(c.code, 1) << e.plant << "\n" << c.output;
    EXPECT_EQ(c.status(e.check_id), "fail") << e.plant << ": " << c.summary(e.check_id);
    EXPECT_NE(c.summary(e.check_id).find(e.names), std::string::npos) << e.plant << ": " << c.summary(e.check_id);
  }
  // Nothing moved: the comparisons that zeros win are no pass.
  const Checked& still = runs["single-logit"];
  EXPECT_EQ(still.status("numerics.reference"), "warn") << still.summary("numerics.reference");
  EXPECT_EQ(still.status("numerics.rank_sync"), "warn") << still.summary("numerics.rank_sync");
}

TEST_F(UserCheck, AResumeThatTrainsTheSavedEpochAgainIsNamed) {
  Checked c = check(
      "trainer_repeat", {"--resume-arg", "--resume {ckpt}", "--checks", "checkpoint.resume"},
      torchrun_cmd(torchrun_, 2, kTrainer, {"--snapshot", fresh_dir("repeat_snap.pt"), "--plant", "repeat-epoch"}),
      torchrun_);
  EXPECT_EQ(c.code, 1) << c.output;
  EXPECT_EQ(c.status("checkpoint.resume"), "fail");
  EXPECT_NE(c.summary("checkpoint.resume")
                .find("trains on the batches of step 0: the saved epoch's data order is trained again"),
            std::string::npos)
      << c.summary("checkpoint.resume");
}

// A mid-epoch resume that restores the RNG before the new DataLoader iterator draws its base seed from it: the state
// at the resumed run's first forward differs from the straight run's in the RNG, named as the cause.
TEST_F(UserCheck, AResumeWhoseRngIsDrawnBeforeItsFirstForwardIsNamed) {
  Checked c = check("loop_loader_rng", {"--resume-arg", "--resume {ckpt}", "--checks", "checkpoint.resume"},
                    torchrun_cmd(torchrun_, 2, kLoop, {"--ckpt", fresh_dir("loader_rng.pt"), "--plant", "loader-rng"}),
                    torchrun_);
  EXPECT_EQ(c.code, 1) << c.output;
  EXPECT_EQ(c.status("checkpoint.resume"), "fail");
  EXPECT_NE(c.summary("checkpoint.resume")
                .find("already differs from the straight run's after the checkpoint, first "
                      "at rng.torch"),
            std::string::npos)
      << c.summary("checkpoint.resume");
}

// torchrun's default rendezvous port taken by another job, and two ladders at once: each launch of a ladder gets a
// free port of its own (PET_MASTER_PORT) when the user's command picks none.
TEST_F(UserCheck, TwoLaddersAtOnceBesideAJobOnTorchrunsDefaultPortDoNotCollide) {
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(29500);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  const int one = 1;
  ::setsockopt(held, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool holding = ::bind(held, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(held, 4) == 0;
  Checked c[2];
  std::thread t[2];
  for (int i = 0; i < 2; ++i)
    t[i] = std::thread([&, i] {
      c[i] = check("two_ladders_" + std::to_string(i), {"--checks", "env.manifest,numerics.rank_sync"},
                   torchrun_cmd(torchrun_, 2, kLoop, {"--epochs", "1"}, /*own_port=*/false), torchrun_);
    });
  for (auto& th : t) th.join();
  ::close(held);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c[i].code, 0) << "ladder " << i << (holding ? " (29500 held)" : "") << "\n" << c[i].output;
    EXPECT_EQ(c[i].status("numerics.rank_sync"), "pass") << c[i].summary("numerics.rank_sync");
  }
}

}  // namespace
