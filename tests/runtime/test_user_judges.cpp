// The judges as the user's script's evidence reaches them (runtime/check/judges.h), each shown to fail on its planted
// fault, and the parsing of `--check/--record -- LAUNCH...`.
#include <gtest/gtest.h>

#include "runtime/check/check_table.h"
#include "runtime/check/judges.h"
#include "runtime/check/user_numerics.h"
#include "runtime/launch/user_job/user_job.h"
#include "runtime/launch/user_job/user_manifest.h"

namespace {
using ddp::CheckStatus;
using ddp::MicroComm;

ddp::CheckResult judge_micro_steps(std::vector<std::vector<MicroComm>> per_rank) {
  ddp::NoSyncEvidence e;
  e.per_rank = std::move(per_rank);
  return ddp::judge_no_sync(e);
}

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
  auto r = judge_micro_steps({steps(3, 4, false), steps(3, 4, false)});
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_EQ(r.details["accumulating_steps"], 6);
}

TEST(UserNoSync, AccumulationWithoutNoSyncFailsNamingTheMicroStep) {
  auto r = judge_micro_steps({steps(3, 4, true), steps(3, 4, true)});
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("micro-step 0 of 4"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("no_sync"), std::string::npos) << r.summary;
}

TEST(UserNoSync, ALastMicroStepWithoutSyncFails) {
  auto v = steps(2, 2, false);
  v.back().collectives = 0;
  auto r = judge_micro_steps({v});
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("did not synchronise"), std::string::npos) << r.summary;
}

TEST(UserNoSync, FallsBackToDdpsSyncFlagWhenNotCounted) {
  std::vector<MicroComm> v(2);
  v[0].micro = 0;
  v[0].sync_flag = true;  // accumulating with sync on
  v[1].micro = 1;
  for (auto& c : v) c.collectives = -1;
  EXPECT_EQ(judge_micro_steps({v}).status, CheckStatus::fail);
  v[0].sync_flag = false;
  auto r = judge_micro_steps({v});
  EXPECT_EQ(r.status, CheckStatus::pass) << r.summary;
  EXPECT_NE(r.summary.find("sync flag"), std::string::npos);
}

ddp::ShardExpectation without_distributed_sampler(const std::string& sampler_class) {
  ddp::ShardExpectation e;
  e.distributed = false;
  e.sampler_class = sampler_class;
  return e;
}

TEST(UserShard, ALoaderWithoutDistributedSamplerFailsCountingTheSharedIndices) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) per_rank[r].push_back({0, 0, 0, 0, {0, 1, 2, 3}});
  auto res = ddp::judge_no_distributed_sampler(per_rank, without_distributed_sampler("RandomSampler"));
  EXPECT_EQ(res.status, CheckStatus::fail);
  EXPECT_NE(res.summary.find("rank 0 and rank 1 read 4 of the same 4 indices"), std::string::npos) << res.summary;
  EXPECT_NE(res.summary.find("DistributedSampler"), std::string::npos);
}

TEST(UserShard, AnotherShardingWithDisjointRanksPassesAndOneSharedIndexFails) {
  // accelerate's BatchSamplerShard: each rank every other batch of one shuffled order.
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  per_rank[0] = {{0, 0, 0, 0, {5, 1}}, {0, 1, 1, 0, {7, 2}}, {1, 0, 0, 1, {0, 3}}};
  per_rank[1] = {{0, 0, 0, 0, {0, 3}}, {0, 1, 1, 0, {6, 4}}, {1, 0, 0, 1, {5, 1}}};
  auto res = ddp::judge_no_distributed_sampler(per_rank, without_distributed_sampler("BatchSamplerShard"));
  EXPECT_EQ(res.status, CheckStatus::pass) << res.summary;
  EXPECT_NE(res.summary.find("shard with BatchSamplerShard"), std::string::npos) << res.summary;
  per_rank[1][2].indices = {0, 5};  // epoch 1: index 5 on both ranks
  res = ddp::judge_no_distributed_sampler(per_rank, without_distributed_sampler("BatchSamplerShard"));
  EXPECT_EQ(res.status, CheckStatus::fail) << res.summary;
  EXPECT_NE(res.summary.find("in pass 1 rank 0 and rank 1 read 1 of the same 2 indices"), std::string::npos)
      << res.summary;
}

// DistributedSampler's own rule over 96 items, 2 ranks, batches of 8: what each rank draws in a pass given the
// seed, the epoch its sampler is at and the rank and world it was built with.
struct Drawn {
  uint64_t seed = 0;
  int epoch = 0, rank = 0, world = 2;
};
std::vector<ddp::ConsumedBatch> pass_of(int pass, const Drawn& d, bool with_epoch = true) {
  std::vector<ddp::ConsumedBatch> out;
  const auto idx = ddp::distributed_sampler_indices(96, d.world, d.rank, true, d.seed, d.epoch, false);
  for (size_t b = 0; b * 8 < idx.size(); ++b) {
    ddp::ConsumedBatch c{pass, static_cast<int64_t>(b), 0, static_cast<int64_t>(b),
                         std::vector<int64_t>(idx.begin() + b * 8, idx.begin() + std::min(idx.size(), b * 8 + 8))};
    if (with_epoch) c.sampler_epoch = d.epoch;
    out.push_back(std::move(c));
  }
  return out;
}
ddp::ShardExpectation distributed(std::vector<ddp::SamplerConfig> per_rank = {}) {
  ddp::ShardExpectation e;
  e.dataset_size = 96;
  e.expected = [](int epoch, int rank) { return ddp::distributed_sampler_indices(96, 2, rank, true, 0, epoch, false); };
  e.per_rank = std::move(per_rank);
  return e;
}
void add(std::vector<ddp::ConsumedBatch>& to, std::vector<ddp::ConsumedBatch> more) {
  to.insert(to.end(), more.begin(), more.end());
}

// The rule is applied at the epoch the sampler was at, not at the pass's number: a loop that counts epochs from 1,
// or a pass that a peek at the first batch made the second of its epoch, is no fault.
TEST(UserShard, PassesJudgedAtTheSamplersOwnEpoch) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) {
    add(per_rank[r], pass_of(0, {0, 1, r}));
    add(per_rank[r], pass_of(1, {0, 2, r}));
  }
  auto res = ddp::judge_shard_rule(per_rank, distributed());
  EXPECT_EQ(res.status, CheckStatus::pass) << res.summary;
  EXPECT_NE(res.summary.find("exactly as DistributedSampler's rule says"), std::string::npos) << res.summary;
}

TEST(UserShard, SamplersSeededPerRankAreNamedWithTheOverlapAndTheUnread) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) per_rank[r] = pass_of(0, {static_cast<uint64_t>(r), 0, r});
  auto res = ddp::judge_shard_rule(per_rank, distributed({{0, 2, 0}, {1, 2, 1}}));
  ASSERT_EQ(res.status, CheckStatus::fail) << res.summary;
  const int64_t shared = res.details["passes"][0]["duplicates"], unread = res.details["passes"][0]["missing"];
  EXPECT_GT(shared, 0);
  EXPECT_EQ(unread, shared);  // 96 reads in all: each index read twice is one nobody read
  EXPECT_NE(res.summary.find("rank 0 and rank 1 read " + std::to_string(shared) + " of the same 48 indices"),
            std::string::npos)
      << res.summary;
  EXPECT_NE(res.summary.find(std::to_string(unread) + " of 96 never read"), std::string::npos) << res.summary;
  EXPECT_NE(res.summary.find("seeded differently (seed 0 on rank 0, 1 on rank 1)"), std::string::npos) << res.summary;
}

TEST(UserShard, ASamplerBuiltForAnotherWorldOrRankIsNamed) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) per_rank[r] = pass_of(0, {0, 0, 0, 1});  // DistributedSampler(ds, num_replicas=1)
  auto res = ddp::judge_shard_rule(per_rank, distributed({{0, 1, 0}, {0, 1, 0}}));
  ASSERT_EQ(res.status, CheckStatus::fail) << res.summary;
  EXPECT_NE(res.summary.find("rank 0's sampler has num_replicas=1 in a world of 2"), std::string::npos) << res.summary;
  for (int r = 0; r < 2; ++r) per_rank[r] = pass_of(0, {0, 0, 0, 2});  // both built with rank=0
  res = ddp::judge_shard_rule(per_rank, distributed({{0, 2, 0}, {0, 2, 0}}));
  ASSERT_EQ(res.status, CheckStatus::fail) << res.summary;
  EXPECT_NE(res.summary.find("ranks 0 and 1 both have a sampler of rank 0"), std::string::npos) << res.summary;
}

TEST(UserShard, EpochsThatDifferBetweenRanksOrRepeatAreNamed) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) per_rank[r] = pass_of(0, {0, r, r});  // set_epoch(epoch + rank)
  auto res = ddp::judge_shard_rule(per_rank, distributed({{0, 2, 0}, {0, 2, 1}}));
  ASSERT_EQ(res.status, CheckStatus::fail) << res.summary;
  EXPECT_NE(res.summary.find("different epochs in this pass (epoch 0 on rank 0, 1 on rank 1)"), std::string::npos)
      << res.summary;
  for (int r = 0; r < 2; ++r) {
    per_rank[r] = pass_of(0, {0, 0, r});
    add(per_rank[r], pass_of(1, {0, 0, r}));
  }
  res = ddp::judge_shard_rule(per_rank, distributed());
  ASSERT_EQ(res.status, CheckStatus::fail) << res.summary;
  EXPECT_NE(res.summary.find("drew passes 0 and 1 at the same epoch 0"), std::string::npos) << res.summary;
  // Without the sampler's own epoch the order is compared.
  for (int r = 0; r < 2; ++r) {
    per_rank[r] = pass_of(0, {0, 0, r}, false);
    add(per_rank[r], pass_of(1, {0, 0, r}, false));
  }
  res = ddp::judge_shard_rule(per_rank, distributed());
  ASSERT_EQ(res.status, CheckStatus::fail) << res.summary;
  EXPECT_NE(res.summary.find("same order in passes 0 and 1: set_epoch was not applied"), std::string::npos)
      << res.summary;
}

// A sampler of the user's own that partitions in another order (a DistributedSampler subclass) is no fault.
TEST(UserShard, APartitionInAnOrderOfItsOwnPasses) {
  std::vector<std::vector<ddp::ConsumedBatch>> per_rank(2);
  for (int r = 0; r < 2; ++r) per_rank[r] = pass_of(0, {0, 0, r});
  std::swap(per_rank[0][0].indices, per_rank[0][1].indices);
  auto res = ddp::judge_shard_rule(per_rank, distributed());
  EXPECT_EQ(res.status, CheckStatus::pass) << res.summary;
  EXPECT_NE(res.summary.find("in an order of their own"), std::string::npos) << res.summary;
}

ddp::CheckResult judge_states(const std::vector<std::map<std::string, std::string>>& straight,
                              const std::vector<std::map<std::string, std::string>>& resumed) {
  ddp::ResumeEvidence e;
  e.killed = "killed right after checkpoint 1 (step 78)";
  e.ranks = ddp::compare_final_states(straight, resumed);
  return ddp::judge_resume(e);
}

TEST(UserResume, EqualFinalStatesPassAndTheFirstDifferenceIsNamed) {
  std::map<std::string, std::string> a = {{"param:fc1.weight", "aa"}, {"optimizer:fc1.weight.exp_avg", "bb"}};
  EXPECT_EQ(judge_states({a, a}, {a, a}).status, CheckStatus::pass);
  auto b = a;
  b["optimizer:fc1.weight.exp_avg"] = "cc";
  auto r = judge_states({a, a}, {a, b});
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("rank 1: optimizer:fc1.weight.exp_avg differs"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("does not restore the optimizer"), std::string::npos) << r.summary;
  EXPECT_EQ(judge_states({a}, {{}}).status, CheckStatus::fail);
  EXPECT_EQ(judge_states({{}}, {{}}).status, CheckStatus::fail);  // nothing compared is no pass
}

TEST(UserManifest, TheScriptsArgvBecomesConfigOptionsTheDiffCanName) {
  auto c = ddp::config_from_argv({"train.py", "--lr", "3e-4", "--amp", "--epochs=2", "data"});
  EXPECT_EQ(c.script, "train.py");
  EXPECT_EQ(c.args["--lr"], "3e-4");
  EXPECT_EQ(c.args["--amp"], true);
  EXPECT_EQ(c.args["--epochs"], "2");
  EXPECT_EQ(c.args["positional.0"], "data");
}

// An unknown id is a usage error the ladder reports before anything starts (the table owns the ids).
TEST(CheckTable, UnknownIdsAreNamedAndTheTableIsTheLadderOrder) {
  EXPECT_EQ(ddp::unknown_check_id({"env.manifest", "faults.exit"}), "");
  EXPECT_NE(ddp::unknown_check_id({"env.manifest", "nope"}).find("'nope'"), std::string::npos);
  EXPECT_EQ(ddp::check_ids(),
            (std::vector<std::string>{"env.manifest", "data.shard_rule", "data.same_dataset", "train.learns",
                                      "numerics.finite", "train.mode", "train.schedule", "train.iteration",
                                      "numerics.reference", "numerics.rank_sync", "memory.steady", "comm.no_sync",
                                      "checkpoint.complete", "checkpoint.resume", "faults.exit"}));
}

TEST(UserCli, SplitsOurOptionsFromTheLaunchCommand) {
  const char* argv[] = {
      "ddp_profile",      "--check", "--out", "X", "--resume-arg", "--resume {ckpt}", "--", "torchrun",
      "--nproc-per-node", "2",       "--out", "Y"};
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
  EXPECT_EQ(parse({"ddp_profile", "--check", "--"}), 2);                                        // nothing to launch
  EXPECT_EQ(parse({"ddp_profile", "--check", "--resume-arg", "--resume", "--", "python"}), 2);  // no {ckpt}
  EXPECT_EQ(parse({"ddp_profile", "--record", "--resume-arg", "{ckpt}", "--", "python"}), 2);
  EXPECT_EQ(parse({"ddp_profile", "--check", "--", "python", "/no/such/train.py"}), 2);
  const char* ours[] = {"ddp_profile", "--analyze", "x"};
  EXPECT_FALSE(ddp::is_user_job_command(3, ours));
}

}  // namespace
