// The user's own script under the closed loop (`ddp_profile --check/--record -- LAUNCH...`, docs/python.md), with the
// real torchrun and torch of the venv (skipped without it, saying so): the correct example scripts pass every check,
// each planted user mistake is named by the check that owns it, 1 and 3 ranks work, bad input exits early.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "integration_support.h"
#include "torch_venv.h"
#include "user_check_support.h"

namespace {
using ddptest::fresh_dir;
using ddptest::kExe;
using ddptest::read_json;
using ddptest::user_check::check;
using ddptest::user_check::Checked;
using ddptest::user_check::companion_env;
using ddptest::user_check::kExamples;
using ddptest::user_check::kScripts;
using ddptest::user_check::torchrun_cmd;
using ddptest::user_check::UserCheck;

std::string file_bytes(const std::string& p) { return ddptest::read_file(p); }

TEST_F(UserCheck, TheSeedJobInPlainPyTorchPassesTheWholeLadder) {
  const std::string script = kExamples + "/seed_job.py", before = file_bytes(script);
  const std::string ckpt = fresh_dir("seed_ckpt.pt");
  Checked c = check("seed_all", {"--resume-arg", "--resume {ckpt}"},
                    torchrun_cmd(torchrun_, 2, script, {"--ckpt", ckpt}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  for (const char* id : {"env.manifest", "data.shard_rule", "data.same_dataset", "train.learns", "numerics.finite",
                         "train.mode", "train.schedule", "train.iteration", "numerics.reference", "numerics.rank_sync",
                         "memory.steady", "comm.no_sync", "checkpoint.complete", "checkpoint.resume", "faults.exit"})
    EXPECT_EQ(c.status(id), "pass") << id << ": " << c.summary(id);
  EXPECT_EQ(file_bytes(script), before) << "the user's script was modified";
  // The planted hang: before the ranks were ended, their Flight Recorder dumps named the collective the hung rank never
  // joined (docs/flight-recorder.md), and the dumps stay in the run for --analyze.
  std::string hang;
  for (const auto& ch : c.checks["checks"])
    if (ch["id"] == "faults.exit")
      for (const auto& d : ch["details"])
        if (d["kind"] == "hang") hang = d["message"];
  const std::string culprit = "rank " + hang.substr(5, hang.find(' ', 5) - 5);
  EXPECT_NE(hang.find("Flight Recorder: the ranks part at all_reduce #"), std::string::npos) << hang;
  EXPECT_NE(hang.find(culprit + " never joined it"), std::string::npos) << hang;
  const std::string dumps = c.checks["run"].get<std::string>() + "/fault_hang/flight_recorder";
  auto fr = ddptest::run({kExe, "--analyze", dumps}, dumps + ".log", 60);
  EXPECT_EQ(fr.code, 0) << fr.output;
  EXPECT_NE(fr.output.find("verdict: the ranks part at all_reduce #"), std::string::npos) << fr.output;
  EXPECT_NE(fr.output.find("seed_job.py:"), std::string::npos) << "the user's line, not torch's: " << fr.output;
  // Our manifest layout, from the companion's records: the diff and the analysis read it as ours.
  auto m = read_json(c.checks["run"].get<std::string>() + "/main/manifest.json");
  EXPECT_EQ(m["launch"]["method"], "torchrun");
  EXPECT_EQ(m["world_size"], 2);
  EXPECT_EQ(m["config"]["args"]["--ckpt"], ckpt);
}

// A script that saves no checkpoint (the README's own pip example without --ckpt, PyTorch's DDP tutorial) made a
// choice with a risk, not a mistake: checkpoint.complete warns with the risk, the resume check skips saying how to
// enable it, and --check exits 0.
TEST_F(UserCheck, WithoutACheckpointTheJobIsWarnedAndWithoutResumeArgTheResumeSkips) {
  Checked c = check("seed_noresume", {"--checks", "checkpoint.complete,checkpoint.resume"},
                    torchrun_cmd(torchrun_, 2, kExamples + "/seed_job.py", {"--epochs", "1"}), torchrun_);
  EXPECT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(c.status("checkpoint.complete"), "warn") << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("saved no checkpoint"), std::string::npos)
      << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("starts again from its first step"), std::string::npos)
      << c.summary("checkpoint.complete");
  EXPECT_EQ(c.status("checkpoint.resume"), "skip");
  EXPECT_NE(c.summary("checkpoint.resume").find("--resume-arg"), std::string::npos);
}

// A correct script whose checkpoint keeps its epoch in its file name, not in the file: checkpoint.complete finds no
// epoch, step or sampler position in it, but the resume (handed the copy under the script's own name) is exact, and
// an exact resume settles what a list of keys suspects: a warn, and --check exits 0.
TEST_F(UserCheck, AnExactResumeSettlesACheckpointThatKeepsItsEpochInItsName) {
  Checked c = check(
      "epoch_in_name", {"--checks", "checkpoint.complete,checkpoint.resume", "--resume-arg", "--resume {ckpt}"},
      torchrun_cmd(torchrun_, 2, kScripts + "/epoch_in_name_job.py", {"--ckpt-dir", fresh_dir("epoch_in_name_ckpt")}),
      torchrun_);
  EXPECT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(c.status("checkpoint.resume"), "pass") << c.summary("checkpoint.resume");
  EXPECT_EQ(c.status("checkpoint.complete"), "warn") << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("epoch"), std::string::npos) << c.summary("checkpoint.complete");
  EXPECT_NE(c.summary("checkpoint.complete").find("but checkpoint.resume passed"), std::string::npos)
      << c.summary("checkpoint.complete");
}

TEST_F(UserCheck, ADifferentModelOptimizerSchedulerAndLossPasses) {
  Checked c =
      check("conv_ok",
            {"--checks",
             "env.manifest,data.shard_rule,numerics.reference,numerics.rank_sync,comm.no_sync,checkpoint.complete"},
            torchrun_cmd(torchrun_, 2, kExamples + "/conv_job.py", {"--ckpt", fresh_dir("conv_ckpt.pt")}), torchrun_);
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(c.status("numerics.reference"), "pass") << c.summary("numerics.reference");
  EXPECT_EQ(c.status("checkpoint.complete"), "pass") << c.summary("checkpoint.complete");
}

struct Plant {
  const char* script;
  std::vector<std::string> args;
  const char* check_id;
  std::vector<std::string> ours;
  const char* names;  // what the failing check's summary must say
};

TEST_F(UserCheck, EveryPlantedMistakeIsNamedByItsCheck) {
  const std::string seed = kExamples + "/seed_job.py", conv = kExamples + "/conv_job.py";
  const std::string ck = fresh_dir("plant_ckpt.pt");
  const std::vector<Plant> plants = {
      {"seed", {"--plant", "no-set-epoch"}, "data.shard_rule", {}, "set_epoch"},
      {"seed", {"--plant", "no-dist-sampler"}, "data.shard_rule", {}, "no DistributedSampler"},
      {"seed", {"--plant", "sum-loss"}, "numerics.reference", {}, "sum-reduced loss"},
      {"conv", {"--plant", "bn-no-sync"}, "numerics.reference", {}, "SyncBatchNorm"},
      {"seed", {"--plant", "rank-param"}, "numerics.rank_sync", {}, "rank 1's parameters differ"},
      {"seed", {"--plant", "accum-no-sync"}, "comm.no_sync", {}, "no_sync"},
      {"seed", {"--plant", "ckpt-model-only", "--ckpt", ck}, "checkpoint.complete", {}, "optimizer.state"},
      {"seed",
       {"--plant", "resume-model-only", "--ckpt", ck},
       "checkpoint.resume",
       {"--resume-arg", "--resume {ckpt}"},
       "optimizer"},
  };
  for (const Plant& p : plants) {
    std::vector<std::string> ours = p.ours;
    ours.insert(ours.end(), {"--checks", p.check_id});
    Checked c = check(std::string("plant_") + p.args[1], ours,
                      torchrun_cmd(torchrun_, 2, std::string(p.script) == "seed" ? seed : conv, p.args), torchrun_);
    EXPECT_EQ(c.code, 1) << p.args[1] << "\n" << c.output;
    EXPECT_EQ(c.status(p.check_id), "fail") << p.args[1] << ": " << c.summary(p.check_id);
    EXPECT_NE(c.summary(p.check_id).find(p.names), std::string::npos) << p.args[1] << ": " << c.summary(p.check_id);
  }
}

TEST_F(UserCheck, ARankThatCrashesFailsTheRunNamingItsException) {
  Checked c = check("plant_crash", {"--checks", "env.manifest"},
                    torchrun_cmd(torchrun_, 2, kExamples + "/seed_job.py", {"--plant", "crash"}), torchrun_);
  EXPECT_EQ(c.code, 1) << c.output;
  EXPECT_EQ(c.status("env.manifest"), "fail");
  EXPECT_NE(c.summary("env.manifest").find("rank 1"), std::string::npos) << c.summary("env.manifest");
  EXPECT_NE(c.summary("env.manifest").find("RuntimeError: planted crash"), std::string::npos)
      << c.summary("env.manifest");
}

TEST_F(UserCheck, OneAndThreeRanks) {
  for (int n : {1, 3}) {
    Checked c = check("ranks" + std::to_string(n),
                      {"--checks", "env.manifest,data.shard_rule,numerics.reference,numerics.rank_sync,faults.exit"},
                      torchrun_cmd(torchrun_, n, kExamples + "/seed_job.py", {"--epochs", "1"}), torchrun_);
    EXPECT_EQ(c.code, 0) << n << " ranks\n" << c.output;
    for (const char* id :
         {"env.manifest", "data.shard_rule", "numerics.reference", "numerics.rank_sync", "faults.exit"}) {
      // One rank has no replica to compare: the check says so (skip) instead of passing.
      const std::string want = n == 1 && std::string(id) == "numerics.rank_sync" ? "skip" : "pass";
      EXPECT_EQ(c.status(id), want) << n << " ranks, " << id << ": " << c.summary(id);
    }
  }
}

// A poll that reads a heartbeat half-written (a rank descheduled between zeroing its time and writing it, on a loaded
// machine) is not a hang: the supervisor calls one only when a second look still sees no progress. Planted: the
// script zeroes its own time for 0.3 s at step 5 (the supervisor before killed it at once as hung).
TEST_F(UserCheck, AHeartbeatReadHalfWrittenIsNotAHang) {
  Checked c = check("stalled_write", {"--checks", "env.manifest"},
                    torchrun_cmd(torchrun_, 1, kScripts + "/stalled_heartbeat_write.py"), torchrun_);
  EXPECT_EQ(c.code, 0) << c.output;
  EXPECT_EQ(c.status("env.manifest"), "pass") << c.summary("env.manifest");
  EXPECT_EQ(c.output.find("hung"), std::string::npos) << c.output;
}

// A user's script is checked by ddp_profile alone: copied to a folder without ddp_profile_runtime beside it (what a
// pip install of the tools holds), it links no LibTorch and runs the ladder; our own job, which trains with LibTorch,
// says in one line where it runs and how to get it.
TEST_F(UserCheck, YourScriptIsCheckedWithoutLibTorchAndOurJobSaysWhereItRuns) {
  const std::string alone = fresh_dir("alone");
  std::filesystem::create_directories(alone);
  const std::string exe = alone + "/ddp_profile";
  std::filesystem::copy_file(kExe, exe);
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  auto ldd = ddptest::run({"/usr/bin/ldd", exe}, alone + ".ldd.log", 60);
  ASSERT_EQ(ldd.code, 0) << ldd.output;
  for (const char* lib : {"libtorch", "libc10"}) EXPECT_EQ(ldd.output.find(lib), std::string::npos) << ldd.output;
  const std::string out = alone + "/checked";
  auto r = ddptest::run({exe, "--check", "--checks", "data.shard_rule,numerics.reference", "--out", out, "--",
                         torchrun_, "--nproc-per-node", "2", kExamples + "/seed_job.py"},
                        alone + ".check.log", 600, companion_env(torchrun_));
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json checks = read_json(out + "/checks.json");
  for (const auto& c : checks["checks"]) EXPECT_EQ(c["status"], "pass") << c.dump();
  EXPECT_EQ(checks["checks"].size(), 2u) << checks.dump();
  auto ours = ddptest::run({exe, "--record", "--out", alone + "/ours"}, alone + ".ours.log", 60);
  EXPECT_EQ(ours.code, 1) << ours.output;
  EXPECT_NE(ours.output.find("ddp_profile_runtime"), std::string::npos) << ours.output;
  EXPECT_NE(ours.output.find("--check -- torchrun"), std::string::npos) << ours.output;
}

TEST_F(UserCheck, BadInputEndsEarlyWithOneLine) {
  const std::string out = fresh_dir("bad");
  auto env = companion_env(torchrun_);
  auto no_attach = ddptest::run(
      {kExe, "--check", "--out", out + "/a", "--", torchrun_, "--nproc-per-node", "1", kScripts + "/no_attach.py"},
      out + ".a.log", 300, env);
  EXPECT_EQ(no_attach.code, 2) << no_attach.output;
  EXPECT_NE(no_attach.output.find("never trained a DistributedDataParallel model"), std::string::npos)
      << no_attach.output;
  auto not_runnable =
      ddptest::run({kExe, "--check", "--out", out + "/b", "--", "/no/such/torchrun", "x.py"}, out + ".b.log", 60, env);
  EXPECT_EQ(not_runnable.code, 2) << not_runnable.output;
  EXPECT_NE(not_runnable.output.find("/no/such/torchrun"), std::string::npos) << not_runnable.output;
  auto crash = ddptest::run({kExe, "--check", "--out", out + "/c", "--", torchrun_, "--nproc-per-node", "1",
                             kScripts + "/crash_before_step.py"},
                            out + ".c.log", 300, env);
  EXPECT_EQ(crash.code, 1) << crash.output;
  EXPECT_NE(crash.output.find("ValueError: bad config: --data points nowhere"), std::string::npos) << crash.output;
}

// A companion of another heartbeat format (a stale install) is refused, both formats named, before its records are
// misread: planted by a script that writes format 0 (before the record had a version) into its own heartbeat.
TEST_F(UserCheck, ACompanionOfAnotherHeartbeatFormatIsRefusedNamingBoth) {
  Checked c = check("old_companion", {"--checks", "env.manifest"},
                    torchrun_cmd(torchrun_, 1, kScripts + "/old_companion.py"), torchrun_);
  EXPECT_EQ(c.code, 1) << c.output;
  EXPECT_NE(c.output.find("writes heartbeat format 0 (before versions), this ddp_profile reads format 2"),
            std::string::npos)
      << c.output;
}

TEST_F(UserCheck, RecordWritesPerRankProfilerTracesThatTheOfflineCommandsRead) {
  const std::string out = fresh_dir("user_record");
  auto env = companion_env(torchrun_);
  std::vector<std::string> args = {kExe, "--record", "--out", out, "--"};
  for (const auto& a : torchrun_cmd(torchrun_, 2, kExamples + "/seed_job.py", {"--epochs", "1"})) args.push_back(a);
  auto r = ddptest::run(args, out + ".log", 600, env);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/rank0.pt.trace.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/rank1.pt.trace.json"));
  EXPECT_EQ(read_json(out + "/manifest.json")["world_size"], 2);
  auto a = ddptest::run({kExe, "--analyze", out, "--json"}, out + ".analyze.log", 120);
  ASSERT_EQ(a.code, 0) << a.output;
  auto j = ddptest::printed_json(a.output);
  ASSERT_FALSE(j.is_discarded()) << a.output;
  // The companion's data path made into our native traces: the folder reads as one of our runs.
  EXPECT_EQ(j["source"], "ddp_profile");
  EXPECT_TRUE(std::filesystem::exists(out + "/rank1.ddpt"));
  auto e = ddptest::run({kExe, "--export", out, "-o", out + "/merged.json"}, out + ".export.log", 120);
  EXPECT_EQ(e.code, 0) << e.output;
  // The Kineto traces beside them still read as any PyTorch job's.
  auto k = ddptest::run({kExe, "--analyze", out + "/rank0.pt.trace.json", out + "/rank1.pt.trace.json", "--json"},
                        out + ".analyze_kineto.log", 120);
  ASSERT_EQ(k.code, 0) << k.output;
  EXPECT_EQ(ddptest::printed_json(k.output)["source"], "kineto");
}

}  // namespace

namespace {
// --diff of two checked runs of the user's script names the option of their argv that differs (the one-variable
// rule) and where the tensors first diverge.
TEST_F(UserCheck, DiffOfTwoCheckedRunsNamesTheArgvDifference) {
  const std::string seed = kExamples + "/seed_job.py";
  Checked a = check("diff_a", {"--checks", "numerics.reference"}, torchrun_cmd(torchrun_, 2, seed, {"--epochs", "1"}),
                    torchrun_);
  Checked b = check("diff_b", {"--checks", "numerics.reference"},
                    torchrun_cmd(torchrun_, 2, seed, {"--epochs", "1", "--plant", "sum-loss"}), torchrun_);
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(b.code, 1) << b.output;
  const std::string out = fresh_dir("diff_ab");
  auto d = ddptest::run({kExe, "--diff", a.checks["run"].get<std::string>() + "/main",
                         b.checks["run"].get<std::string>() + "/main", "--json"},
                        out + ".log", 120);
  ASSERT_EQ(d.code, 0) << d.output;
  auto j = ddptest::printed_json(d.output);
  ASSERT_FALSE(j.is_discarded()) << d.output;
  bool plant = false;
  for (const auto& c : j["config"]["differences"]) plant |= c["key"] == "config.args.--plant";
  EXPECT_TRUE(plant) << j["config"].dump();
}
}  // namespace
