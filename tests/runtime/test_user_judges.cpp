// The judgements only the user's job needs (runtime/user/user_judges.h), each shown to fail on its planted fault,
// and the parsing of `--check/--record -- LAUNCH...`.
#include <gtest/gtest.h>

#include "runtime/user/user_job.h"
#include "runtime/user/user_judges.h"
#include "runtime/user/user_manifest.h"

namespace {
using ddp::CheckStatus;
using ddp::MicroComm;

std::vector<MicroComm> steps(int n, int micros, bool sync_every_micro) {
  std::vector<MicroComm> v;
  for (int s = 0; s < n; ++s)
    for (int m = 0; m < micros; ++m) {
      MicroComm c;
      c.step = s;
      c.micro = m;
      c.collectives = (sync_every_micro || m + 1 == micros) ? 2 : 0;
      v.push_back(c);
    }
  return v;
}

TEST(UserNoSync, AccumulationThatCommunicatesOnlyOnTheLastMicroStepPasses) {
  auto r = ddp::judge_user_no_sync({steps(3, 4, false), steps(3, 4, false)});
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_EQ(r.details["accumulating_steps"], 6);
}

TEST(UserNoSync, AccumulationWithoutNoSyncFailsNamingTheMicroStep) {
  auto r = ddp::judge_user_no_sync({steps(3, 4, true), steps(3, 4, true)});
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("micro-step 0 of 4"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("no_sync"), std::string::npos) << r.summary;
}

TEST(UserNoSync, ALastMicroStepWithoutSyncFails) {
  auto v = steps(2, 2, false);
  v.back().collectives = 0;
  auto r = ddp::judge_user_no_sync({v});
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("did not synchronise"), std::string::npos) << r.summary;
}

TEST(UserNoSync, FallsBackToDdpsSyncFlagWhenNotCounted) {
  std::vector<MicroComm> v(2);
  v[0].micro = 0;
  v[0].sync_flag = true;  // accumulating with sync on
  v[1].micro = 1;
  for (auto& c : v) c.collectives = -1;
  EXPECT_EQ(ddp::judge_user_no_sync({v}).status, CheckStatus::fail);
  v[0].sync_flag = false;
  auto r = ddp::judge_user_no_sync({v});
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_NE(r.summary.find("sync flag"), std::string::npos);
}

TEST(UserShard, ALoaderWithoutDistributedSamplerFailsCountingTheSharedIndices) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) per_rank[r].push_back({0, 0, 0, 0, {0, 1, 2, 3}});
  auto res = ddp::judge_no_distributed_sampler(per_rank, "RandomSampler");
  EXPECT_EQ(res.status, CheckStatus::fail);
  EXPECT_NE(res.summary.find("read 4 of the same 4 indices"), std::string::npos) << res.summary;
  EXPECT_NE(res.summary.find("DistributedSampler"), std::string::npos);
}

TEST(UserResume, EqualFinalStatesPassAndTheFirstDifferenceIsNamed) {
  std::map<std::string, std::string> a = {{"param:fc1.weight", "aa"}, {"optimizer:fc1.weight.exp_avg", "bb"}};
  EXPECT_EQ(ddp::judge_resume_states({a, a}, {a, a}, 1, 78).status, CheckStatus::pass);
  auto b = a;
  b["optimizer:fc1.weight.exp_avg"] = "cc";
  auto r = ddp::judge_resume_states({a, a}, {a, b}, 1, 78);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("rank 1: optimizer:fc1.weight.exp_avg differs"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("optimizer"), std::string::npos);
  EXPECT_EQ(ddp::judge_resume_states({a}, {{}}, 1, 78).status, CheckStatus::fail);
  EXPECT_EQ(ddp::judge_resume_states({{}}, {{}}, 1, 78).status, CheckStatus::fail);  // nothing compared is no pass
}

TEST(UserManifest, TheScriptsArgvBecomesConfigOptionsTheDiffCanName) {
  auto c = ddp::config_from_argv({"train.py", "--lr", "3e-4", "--amp", "--epochs=2", "data"});
  EXPECT_EQ(c["script"], "train.py");
  EXPECT_EQ(c["args"]["--lr"], "3e-4");
  EXPECT_EQ(c["args"]["--amp"], true);
  EXPECT_EQ(c["args"]["--epochs"], "2");
  EXPECT_EQ(c["args"]["positional.0"], "data");
}

TEST(UserCli, SplitsOurOptionsFromTheLaunchCommand) {
  const char* argv[] = {"ddp_profile", "--check", "--out", "X", "--resume-arg", "--resume {ckpt}", "--",
                        "torchrun", "--nproc-per-node", "2", "--out", "Y"};
  const int argc = static_cast<int>(std::size(argv));
  ASSERT_TRUE(ddp::is_user_job_command(argc, argv));
  ddp::UserJobCommand u;
  int code = -1;
  ASSERT_TRUE(ddp::parse_user_job_command(argc, argv, u, code));
  EXPECT_TRUE(u.check);
  EXPECT_EQ(u.out_dir, "X");
  EXPECT_EQ(u.resume_arg, "--resume {ckpt}");
  EXPECT_EQ(u.launch, (std::vector<std::string>{"torchrun", "--nproc-per-node", "2", "--out", "Y"}));
}

TEST(UserCli, UsageErrorsExitTwo) {
  auto parse = [](std::vector<const char*> argv) {
    ddp::UserJobCommand u;
    int code = -1;
    bool ok = ddp::parse_user_job_command(static_cast<int>(argv.size()), argv.data(), u, code);
    return ok ? 0 : code;
  };
  EXPECT_EQ(parse({"ddp_profile", "--check", "--"}), 2);                                   // nothing to launch
  EXPECT_EQ(parse({"ddp_profile", "--check", "--resume-arg", "--resume", "--", "python"}), 2);  // no {ckpt}
  EXPECT_EQ(parse({"ddp_profile", "--record", "--resume-arg", "{ckpt}", "--", "python"}), 2);
  EXPECT_EQ(parse({"ddp_profile", "--check", "--checks", "nope", "--", "python"}), 2);
  EXPECT_EQ(parse({"ddp_profile", "--check", "--", "python", "/no/such/train.py"}), 2);
  const char* ours[] = {"ddp_profile", "--analyze", "x"};
  EXPECT_FALSE(ddp::is_user_job_command(3, ours));
}

}  // namespace
