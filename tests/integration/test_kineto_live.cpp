// PyTorch's own profiler, live: the seed's job in Python (tests/python/kineto_job.py: MLP, AdamW,
// DistributedSampler, DataLoader with 2 workers, torch.profiler around 30 steps, DDP over two gloo ranks on loopback)
// writes one Kineto trace per rank under the real torchrun during the test, once balanced and once with a planted
// cause, and --analyze must name the planted rank and stage first and nothing of its size in the balanced run.
// The committed traces (test_kineto_cli.cpp) pin one PyTorch version; this follows the venv's. Needs DDP_TORCHRUN
// (torch >= 2 in a venv, see torch_venv.h); skips without it.
#include <gtest/gtest.h>

#include <filesystem>

#include "integration_support.h"
#include "kineto_cli_support.h"
#include "torch_venv.h"

namespace {
namespace fs = std::filesystem;

const std::string kJob = std::string(DDP_SOURCE_DIR) + "/tests/python/kineto_job.py";

// Runs the job under torchrun into a fresh folder; returns the folder of per-rank traces.
std::string record_with_pytorch(const std::string& torchrun, const std::string& name,
                                const std::vector<std::string>& plant, const std::vector<std::string>& more = {},
                                size_t files = 2) {
  const std::string out = ddptest::fresh_dir(name);
  std::vector<std::string> args = {
      torchrun, "--nproc-per-node", "2", "--master-port", std::to_string(ddptest::free_port()), kJob, "--out", out};
  for (const auto& p : plant) args.insert(args.end(), {"--plant", p});
  args.insert(args.end(), more.begin(), more.end());
  auto r = ddptest::run(args, out + ".log", 120, ddptest::venv_env(torchrun));
  EXPECT_EQ(r.code, 0) << r.output;
  size_t traces = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec))
    traces += e.path().string().find(".pt.trace.json") != std::string::npos;
  EXPECT_EQ(traces, files) << "one trace per rank and cycle in " << out << "\n" << r.output;
  return out;
}

}  // namespace

TEST(KinetoLive, PyTorchsOwnTracesNameThePlantedRankAndStageAndNothingOfItsSizeWhenBalanced) {
  const std::string torchrun = ddptest::venv_torchrun();
  if (torchrun.empty()) GTEST_SKIP() << ddptest::kNoTorchrun;

  // Rank 1's Dataset sleeps 1.6 ms per sample: its DataLoader cannot keep up, rank 0 waits in the allreduce. At
  // 0.4 ms the verdict held on a quiet machine only: with another process busy, the exposed allreduce grew past it.
  const std::string slow = record_with_pytorch(torchrun, "kineto_live_slow_data", {"slow-data:1"});
  const nlohmann::json planted = ddptest::analyze_json("kineto_live_slow_data_analyze", {slow});
  EXPECT_EQ(planted["source"], "kineto");
  ddptest::expect_top_cause(planted, 1, "wait_data", "slow-data:1");
  ASSERT_EQ(planted["clock_alignment"].size(), 2u);
  EXPECT_GE(planted["clock_alignment"][1]["collectives"].get<int>(), 25);

  const std::string balanced = record_with_pytorch(torchrun, "kineto_live_balanced", {});
  const nlohmann::json none = ddptest::analyze_json("kineto_live_balanced_analyze", {balanced});
  EXPECT_EQ(none["world_size"], 2);
  EXPECT_GE(none["steps"].get<int>(), 25);
  // Live on two cores, both ranks' DataLoader workers compete with the training processes for the CPU, so both ranks
  // wait some for input: symmetrically on a quiet machine (6-14 % of a step each in trial runs), but with another
  // process busy on one core the scheduler starves one rank's workers more than the other's (seen: 2.68 against 1.44
  // ms/step), and the analysis rightly names that rank's input. What holds on any machine is the size: nothing in the
  // balanced run costs a step what the planted cause does. The committed traces, recorded on a quiet machine, keep
  // the strict bound that no rank is named at all (test_kineto_cli.cpp).
  ASSERT_FALSE(planted["causes"].empty());
  const double planted_ms = planted["causes"][0]["lost_ms_per_step"].get<double>();
  for (const auto& c : none["causes"]) {
    if (c["rank"].get<int>() < 0) continue;
    EXPECT_LT(c["lost_ms_per_step"].get<double>(), planted_ms / 4)
        << "the balanced run names a cause of at least a quarter the size of the planted one (" << planted_ms
        << " ms/step): " << c.dump();
  }
}

// Host work between the batch and the forward (tensor operators on rank 1, no sleep): no stage of ours holds it, so
// it is rank 1's untracked main-thread time, and the operators PyTorch's profiler recorded in it are named there.
TEST(KinetoLive, HostWorkBetweenTheBatchAndTheForwardIsNamedByItsOperators) {
  const std::string torchrun = ddptest::venv_torchrun();
  if (torchrun.empty()) GTEST_SKIP() << ddptest::kNoTorchrun;
  const std::string dir = record_with_pytorch(torchrun, "kineto_live_host_work", {"host-work:1"}, {"--steps", "12"});
  const nlohmann::json a = ddptest::analyze_json("kineto_live_host_work_analyze", {dir});
  ASSERT_FALSE(a["causes"].empty()) << a.dump(2);
  const nlohmann::json& top = a["causes"][0];
  EXPECT_EQ(top["rank"], 1) << top.dump(2);
  EXPECT_EQ(top["stage"], "other") << top.dump(2);
  ASSERT_TRUE(top["evidence"].contains("operators")) << top.dump(2);
  std::string named;
  for (const auto& o : top["evidence"]["operators"]) named += o["name"].get<std::string>() + " ";
  EXPECT_NE(named.find("aten::sin"), std::string::npos) << named;
  EXPECT_NE(top["explanation"].get<std::string>().find("the profiler's operators take"), std::string::npos)
      << top["explanation"];
}

// As the PyTorch docs write it: schedule(wait, warmup, active, repeat) and tensorboard_trace_handler with its own
// worker name (<host>_<pid>, the rank only in distributedInfo): one file per cycle and rank. All cycles are one run
// (steps are the ids the files carry), --cycle picks one. Gloo on CPU records no message size even with
// record_shapes=True (c10d::allreduce_ has Input Dims, no dtype, and no record_param_comms): unknown, not zero.
TEST(KinetoLive, SeveralProfilingCyclesPerRankAreOneRunAndCycleNPicksOne) {
  const std::string torchrun = ddptest::venv_torchrun();
  if (torchrun.empty()) GTEST_SKIP() << ddptest::kNoTorchrun;
  const std::string dir = record_with_pytorch(
      torchrun, "kineto_live_cycles", {},
      {"--cycles", "2", "--steps", "6", "--default-worker-name", "--record-shapes", "--workers", "0"}, 4);
  const nlohmann::json all = ddptest::analyze_json("kineto_live_cycles_analyze", {dir});
  EXPECT_EQ(all["world_size"], 2);
  EXPECT_EQ(all["steps"].get<int>(), 2 * 6 - 1) << "both cycles' steps, the first one a warm-up";
  std::string notes;
  for (const auto& n : all["notes"]) notes += n.get<std::string>() + "\n";
  EXPECT_NE(notes.find("4 files: 2 cycles x 2 ranks, steps 2-7 and 10-15"), std::string::npos) << notes;
  for (const auto& r : all["ranks"]) {
    EXPECT_EQ(r["allreduce"]["sizes_known"], false) << r.dump();
    EXPECT_TRUE(r["allreduce"]["bytes_per_step"].is_null()) << r.dump();
  }
  const nlohmann::json second = ddptest::analyze_json("kineto_live_cycle2_analyze", {dir}, {"--cycle", "2"});
  EXPECT_EQ(second["steps"].get<int>(), 6 - 1) << second.dump();
  std::string second_notes;
  for (const auto& n : second["notes"]) second_notes += n.get<std::string>() + "\n";
  EXPECT_NE(second_notes.find("cycle 2 analysed"), std::string::npos) << second_notes;
  auto r = ddptest::run({ddptest::kExe, "--analyze", dir, "--cycle", "3"}, dir + ".cycle3.log", 60);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("2 profiling cycle(s)"), std::string::npos) << r.output;
}
