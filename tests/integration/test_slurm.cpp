// Our workers under a real Slurm: a one-host cluster on loopback (scripts/slurm_loopback.sh: munged, slurmctld and
// slurmd with their state in a temp folder), started once for these tests and stopped after them. srun without
// MASTER_ADDR/MASTER_PORT, sbatch, scancel of a running job, and a rank killed inside a step. Where Debian's Slurm
// packages are not installed the tests say they skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>

#include "integration_support.h"
#include "tests/support/remove_tree.h"
#include "torch_venv.h"

namespace {
namespace fs = std::filesystem;
using ddptest::kExe;

const std::string kScript = std::string(DDP_SOURCE_DIR) + "/scripts/slurm_loopback.sh";

// The cluster, shared by the tests of this file.
class SlurmCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ddptest::fresh_dir("slurm_cluster");
    fs::create_directories(dir_);
    const int rc = std::system((kScript + " start " + dir_ + " > " + dir_ + ".start.log 2>&1").c_str());
    status_ = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    log_ = ddptest::read_file(dir_ + ".start.log");
  }
  static void TearDownTestSuite() {
    std::system((kScript + " stop " + dir_ + " > /dev/null 2>&1").c_str());
    ddp::testing::remove_tree(dir_);
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED LOUDLY: a loopback Slurm cluster needs root (munged, slurmd)";
    if (status_ == 3)
      GTEST_SKIP() << "SKIPPED LOUDLY: Slurm is not installed (apt-get install slurmctld slurmd slurm-client munge)";
    ASSERT_EQ(status_, 0) << "the loopback cluster did not start:\n" << log_;
  }
  // Slurm's own commands, with this cluster's configuration.
  static std::map<std::string, std::string> env() { return {{"SLURM_CONF", dir_ + "/slurm.conf"}}; }
  static ddptest::Result run(const std::vector<std::string>& args, const std::string& log, double timeout_s) {
    return ddptest::run(args, log, timeout_s, env());
  }
  static std::string dir_, log_;
  static int status_;
};
std::string SlurmCluster::dir_, SlurmCluster::log_;
int SlurmCluster::status_ = -1;

std::vector<std::string> job(const std::string& out) {
  return {kExe, "--worker", "--out", out, "--epochs", "1", "--max-steps", "12"};
}

// A job that runs until it is stopped: one epoch is only 78 steps (~0.4 s), which a loaded machine can finish between
// the test seeing step 20 and its signal arriving (seen: the job ended whole at step 77, and "ended early" was not
// in its summary).
std::vector<std::string> job_until_stopped(const std::string& out) {
  return {kExe, "--worker", "--out", out, "--epochs", "100000", "--max-steps", "1000000"};
}

std::vector<std::string> srun(std::vector<std::string> cmd, std::vector<std::string> opts = {}) {
  std::vector<std::string> args = {"/usr/bin/srun", "--ntasks", "2"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.insert(args.end(), cmd.begin(), cmd.end());
  return args;
}

// srun sets neither MASTER_ADDR nor MASTER_PORT: the ranks find each other from the job's node list and id, say so
// in the manifest, and the run is whole.
TEST_F(SlurmCluster, SrunWithoutMasterAddrRunsBothRanks) {
  const std::string d = ddptest::fresh_dir("slurm_srun");
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  auto r = run(srun(job(d)), d + ".log", 180);
  ASSERT_EQ(r.code, 0) << r.output;
  auto m = ddptest::read_json(d + "/manifest.json");
  ASSERT_FALSE(m.is_discarded()) << r.output;
  EXPECT_EQ(m["launch"]["method"], "srun");
  EXPECT_EQ(m["launch"]["rendezvous_from"], "SLURM_JOB_NODELIST and SLURM_JOB_ID");
  ASSERT_EQ(m["ranks"].size(), 2u);
  EXPECT_EQ(m["ranks"][0]["steps"], 12);
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]);
  EXPECT_TRUE(fs::exists(d + "/rank0.ddpt") && fs::exists(d + "/rank1.ddpt"));
}

// sbatch of the same job: it completes and its run folder analyses.
TEST_F(SlurmCluster, SbatchJobCompletesAndItsRunAnalyses) {
  const std::string d = ddptest::fresh_dir("slurm_sbatch");
  const std::string script = d + ".sbatch";
  std::string line;
  for (const auto& a : srun(job(d))) line += a + " ";
  std::ofstream(script) << "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --output=" << d << ".out\n" << line << "\n";
  auto r = run({"/usr/bin/sbatch", "--wait", script}, d + ".log", 240);
  ASSERT_EQ(r.code, 0) << r.output << ddptest::read_file(d + ".out");
  auto m = ddptest::read_json(d + "/manifest.json");
  ASSERT_FALSE(m.is_discarded()) << ddptest::read_file(d + ".out");
  EXPECT_EQ(m["launch"]["method"], "srun");
  EXPECT_EQ(m["ranks"].size(), 2u);
  auto a = ddptest::run({kExe, "--analyze", d, "--json"}, d + ".analyze.log", 60);
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(ddptest::printed_json(a.output)["ranks"].size(), 2u) << a.output;
}

// scancel of a running job (SIGTERM to every task, SIGKILL after KillWait): every rank flushes its trace, the run
// exports, and its status names the signal.
TEST_F(SlurmCluster, ScancelLeavesCompleteTracesAndAStatusNamingIt) {
  const std::string d = ddptest::fresh_dir("slurm_scancel");
  const std::string script = d + ".sbatch";
  std::string line;
  for (const auto& a : srun(job_until_stopped(d))) line += a + " ";
  std::ofstream(script) << "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --output=" << d << ".out\n" << line << "\n";
  auto sub = run({"/usr/bin/sbatch", "--parsable", script}, d + ".submit.log", 30);
  ASSERT_EQ(sub.code, 0) << sub.output;
  const std::string job_id = sub.output.substr(0, sub.output.find_first_of(";\n"));
  for (int r = 0; r < 2; ++r) ASSERT_GE(ddptest::wait_for_step(d, r, 20, 120).step, 20) << "rank " << r;
  ASSERT_EQ(run({"/usr/bin/scancel", job_id}, d + ".cancel.log", 30).code, 0);
  // The job is gone once squeue no longer lists it (KillWait is 5 s; our ranks exit on the SIGTERM).
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    auto q = run({"/usr/bin/squeue", "-h", "-j", job_id}, d + ".squeue.log", 10);
    gone = q.output.find(job_id) == std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(gone) << "job " << job_id << " still listed 30 s after scancel";
  auto st = ddptest::read_json(d + "/run_status.json");
  ASSERT_FALSE(st.is_discarded()) << ddptest::read_file(d + ".out");
  EXPECT_EQ(st["signal"], "SIGTERM") << st.dump();
  EXPECT_NE(st["message"].get<std::string>().find("scancel"), std::string::npos) << st.dump();
  auto e = ddptest::run({kExe, "--export", d}, d + ".export.log", 60);
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("from 2 rank(s)"), std::string::npos) << e.output;
  // Each rank's trace holds every step it reached before the cancel (and says the rank ended early).
  auto sum = ddptest::run({kExe, "--summary", d, "--json"}, d + ".summary.log", 60);
  ASSERT_EQ(sum.code, 0) << sum.output;
  const nlohmann::json j = ddptest::printed_json(sum.output);
  ASSERT_EQ(j["ranks"].size(), 2u) << sum.output;
  for (const auto& r : j["ranks"]) EXPECT_GE(r["steps"].get<int>(), 20) << r.dump();
  EXPECT_NE(sum.output.find("the rank ended early"), std::string::npos) << sum.output;
}

// A rank killed inside the step: the other rank's collective fails and the whole step ends within 5 s.
TEST_F(SlurmCluster, ARankKilledInsideTheJobEndsTheStepQuickly) {
  const std::string d = ddptest::fresh_dir("slurm_kill");
  auto cmd = job_until_stopped(d);
  ddptest::Proc p = ddptest::start(srun(cmd), d + ".log", env());
  ASSERT_GE(ddptest::wait_for_step(d, 1, 10, 120).step, 10) << ddptest::read_file(d + ".log");
  const ddp::ProgressSnapshot one = ddp::read_progress(ddp::progress_file(d, 1));
  ASSERT_GT(one.pid, 0);
  // Rank 0 must outlive a write to its dead peer's socket (EPIPE, not SIGPIPE's silent end) to say what happened:
  // it ignores SIGPIPE (bit 13 of /proc/PID/status SigIgn). Seen once without: "task 0: Broken pipe", no word.
  const ddp::ProgressSnapshot zero = ddp::read_progress(ddp::progress_file(d, 0));
  const std::string status = ddptest::read_file("/proc/" + std::to_string(zero.pid) + "/status");
  const size_t at = status.find("SigIgn:");
  ASSERT_NE(at, std::string::npos) << status;
  EXPECT_TRUE(std::stoull(status.substr(at + 7, status.find('\n', at) - at - 7), nullptr, 16) & (1ull << (SIGPIPE - 1)))
      << status.substr(at, 40);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(one.pid, SIGKILL), 0);
  const int code = ddptest::wait(p, 60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_NE(code, 0) << ddptest::read_file(d + ".log");
  EXPECT_LT(took, 5.0) << "srun ended " << took << " s after rank 1 was killed\n" << ddptest::read_file(d + ".log");
  const std::string out = ddptest::read_file(d + ".log");
  EXPECT_NE(out.find("rank 0"), std::string::npos) << "rank 0 says why it stopped\n" << out;
}

// The user's own script under the closed loop, launched by srun instead of torchrun: the whole ladder passes (the
// killed run's srun is ended with SIGTERM, so its job releases the node for the next run), and no job is left.
TEST_F(SlurmCluster, TheLadderOnTheUsersOwnScriptUnderSrun) {
  const std::string torchrun = ddptest::venv_torchrun();
  if (torchrun.empty()) GTEST_SKIP() << ddptest::kNoTorchrun;
  const std::string python = (fs::path(torchrun).parent_path() / "python").string();
  const std::string d = ddptest::fresh_dir("slurm_user_check");
  auto env = ddptest::venv_env(torchrun);
  env["PYTHONPATH"] = std::string(DDP_SOURCE_DIR) + "/python";
  env["SLURM_CONF"] = dir_ + "/slurm.conf";
  auto r = ddptest::run(
      {kExe, "--check", "--out", d, "--resume-arg", "--resume {ckpt}", "--", "/usr/bin/srun", "--ntasks", "2", python,
       std::string(DDP_SOURCE_DIR) + "/examples/seed_job.py", "--epochs", "1", "--ckpt", d + ".ckpt.pt"},
      d + ".log", 600, env);
  EXPECT_EQ(r.code, 0) << r.output;
  auto checks = ddptest::read_json(d + "/checks.json");
  ASSERT_FALSE(checks.is_discarded()) << r.output;
  for (const auto& c : checks["checks"]) EXPECT_EQ(c["status"], "pass") << c.dump();
  EXPECT_EQ(ddptest::read_json(d + "/main/manifest.json")["launch"]["method"], "srun");
  auto q = run({"/usr/bin/squeue", "-h"}, d + ".squeue.log", 10);
  EXPECT_EQ(q.output, "") << "jobs left on the cluster";
}

// Analysis where the traces are: srun runs one task per node, each digesting the traces on its own node (here the
// loopback cluster's one node, under a folder named after it, SLURMD_NODENAME) into one shared folder; --analyze of
// that folder says what --analyze of the traces says.
TEST_F(SlurmCluster, DigestsMadeBySrunOnEachNodeAnalyseAsTheTraces) {
  const std::string d = ddptest::fresh_dir("slurm_digest");
  const std::string traces = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-2.11-cpu/slow-data-rank1";
  auto host = run({"/usr/bin/srun", "--nodes", "1", "--ntasks-per-node", "1", "/bin/sh", "-c", "echo $SLURMD_NODENAME"},
                  d + ".host.log", 60);
  ASSERT_EQ(host.code, 0) << host.output;
  const std::string node = host.output.substr(0, host.output.find('\n'));
  ASSERT_FALSE(node.empty()) << host.output;
  fs::create_directories(d + "/local/" + node);
  for (const auto& e : fs::directory_iterator(traces))
    fs::copy_file(e.path(), fs::path(d) / "local" / node / e.path().filename());
  auto r = run({"/usr/bin/srun", "--nodes", "1", "--ntasks-per-node", "1", "/bin/sh", "-c",
                "exec \"$0\" --digest \"$1/$SLURMD_NODENAME\" -o \"$2\"", kExe, d + "/local", d + "/digests"},
               d + ".srun.log", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("digested 2 trace(s)"), std::string::npos) << r.output;
  auto raw = ddptest::run({kExe, "--analyze", traces, "--json"}, d + ".raw.log", 120);
  auto dig = ddptest::run({kExe, "--analyze", d + "/digests", "--json"}, d + ".dig.log", 120);
  ASSERT_EQ(raw.code, 0) << raw.output;
  ASSERT_EQ(dig.code, 0) << dig.output;
  const nlohmann::json a = ddptest::printed_json(raw.output), b = ddptest::printed_json(dig.output);
  EXPECT_EQ(b["causes"][0]["rank"], 1) << b.dump(2);
  EXPECT_EQ(b["causes"][0]["stage"], "wait_data") << b.dump(2);
  EXPECT_EQ(a["verdict"], b["verdict"]);
  EXPECT_EQ(a["causes"], b["causes"]);
  EXPECT_EQ(a["ranks"], b["ranks"]);
}

}  // namespace
