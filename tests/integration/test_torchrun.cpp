// Our workers under the real torchrun (PyPI's torch >= 2), whose agent serves the rendezvous store itself, reads a
// failed worker's message from TORCHELASTIC_ERROR_FILE and restarts the worker group with --max-restarts.
// DDP_TORCHRUN names the torchrun to use (scripts/torchrun_venv.sh creates a venv with it; scripts/test.sh sets the
// variable when that venv exists); without it these tests skip.
#include <gtest/gtest.h>

#include <cstdlib>

#include "integration_support.h"
#include "torch_venv.h"

namespace {
namespace fs = std::filesystem;
using ddptest::kExe;

std::string torchrun() { return ddptest::venv_torchrun(); }

#define REQUIRE_TORCHRUN() \
  if (torchrun().empty()) GTEST_SKIP() << ddptest::kNoTorchrun

ddptest::Result run_torchrun(const std::string& dir, const std::vector<std::string>& torchrun_args,
                             const std::vector<std::string>& job) {
  std::vector<std::string> args = {torchrun(), "--nproc-per-node", "2", "--master-port",
                                   std::to_string(ddptest::free_port())};
  args.insert(args.end(), torchrun_args.begin(), torchrun_args.end());
  args.insert(args.end(), {"--no-python", kExe, "--worker", "--out", dir, "--epochs", "1", "--max-steps", "20"});
  args.insert(args.end(), job.begin(), job.end());
  return ddptest::run(args, dir + ".log", 180);
}

// torchrun's "Root Cause" block: the failure it names first.
std::string root_cause(const std::string& out) {
  auto at = out.find("Root Cause");
  return at == std::string::npos ? "" : out.substr(at);
}

TEST(Torchrun, RunsOurWorkersThroughItsAgentsStore) {
  REQUIRE_TORCHRUN();
  std::string d = ddptest::fresh_dir("torchrun_clean");
  auto r = run_torchrun(d, {}, {});
  ASSERT_EQ(r.code, 0) << r.output;
  auto m = ddptest::read_json(d + "/manifest.json");
  ASSERT_FALSE(m.is_discarded()) << r.output;
  EXPECT_EQ(m["launch"]["method"], "torchrun");
  EXPECT_EQ(m["ranks"][0]["steps"], 20);
  EXPECT_EQ(m["ranks"][1]["steps"], 20);
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]);
  EXPECT_TRUE(fs::exists(d + "/trace.json"));
}

TEST(Torchrun, ItsReportNamesOurMessageForAFailedRank) {
  REQUIRE_TORCHRUN();
  std::string d = ddptest::fresh_dir("torchrun_throw");
  auto r = run_torchrun(d, {}, {"--inject-fault", "rank=1,step=5,kind=throw"});
  EXPECT_NE(r.code, 0) << r.output;
  const std::string root = root_cause(r.output);
  EXPECT_NE(root.find("rank      : 1"), std::string::npos) << r.output;
  EXPECT_NE(root.find("rank 1 ("), std::string::npos) << r.output;
  EXPECT_NE(root.find("injected fault (throw) at step 5"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("error_file: <N/A>"), std::string::npos) << "every rank that failed wrote its error file\n"
                                                                   << r.output;
}

TEST(Torchrun, AKilledRankIsTheRootCauseAndItsPeerSaysWhy) {
  REQUIRE_TORCHRUN();
  std::string d = ddptest::fresh_dir("torchrun_kill");
  auto r = run_torchrun(d, {}, {"--inject-fault", "rank=1,step=5,kind=kill"});
  EXPECT_NE(r.code, 0) << r.output;
  const std::string root = root_cause(r.output);
  EXPECT_NE(root.find("rank      : 1"), std::string::npos) << r.output;
  EXPECT_NE(root.find("SIGKILL"), std::string::npos) << r.output;
  // Rank 0 saw its peer go and says so in its own entry.
  EXPECT_NE(r.output.find("rank 0 ("), std::string::npos) << r.output;
}

TEST(Torchrun, ARestartedWorkerGroupResumesFromTheLatestCompleteCheckpoint) {
  REQUIRE_TORCHRUN();
  std::string d = ddptest::fresh_dir("torchrun_restart");
  // The injected fault fires on the first attempt only (TORCHELASTIC_RESTART_COUNT = 0).
  auto r = run_torchrun(d, {"--max-restarts", "1"},
                        {"--checkpoint-steps", "3,6,9", "--inject-fault", "rank=1,step=8,kind=kill"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("injecting fault 'kill' at step 8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resuming from " + d + "/checkpoints/step6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 0, step 6, 6 batches into the epoch"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("over 14 steps"), std::string::npos) << "steps 6..19 run again, not 0..19\n" << r.output;
  auto m = ddptest::read_json(d + "/manifest.json");
  ASSERT_FALSE(m.is_discarded());
  EXPECT_EQ(m["ranks"][0]["steps"], 20);
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]);
  EXPECT_TRUE(fs::exists(d + "/checkpoints/step9/rank1.pt"));
}

}  // namespace
