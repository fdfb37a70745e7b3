// Stall analysis on synthetic runs whose spans carry their CPU split (tests/traces/analysis/analysis_sim.h): the cores'
// verdict (traces/analysis/cpu_verdict.h). The same timings are analysed with and without the waits for a core that
// explain them: the waits move the blame from a loader stage to the cores, or to the rank whose CPU saturates them.
#include "tests/traces/analysis/analysis_sim.h"

using namespace analysis_test;

namespace {

// Loaders just short of keeping up: 2 workers make a batch in 37 ms, compute uses one every ~17 ms.
Sim marginal_loaders() {
  Sim sim;
  for (RankKnobs& k : sim.rank) k.disk_read = 30, k.transform = 6, k.pin = 1;
  return sim;
}

// The same run on a host whose threads waited for a core: the loaders' workers 60% of their spans, the training
// threads 30% (more loader processes than cores).
Sim saturated(Sim sim, int cores = 2) {
  sim.cores = cores;
  for (RankKnobs& k : sim.rank) k.loader_wait_share = 0.6, k.wait_share = 0.3;
  return sim;
}

bool names_a_loader_stage(const ddp::Analysis& a) {
  for (const auto& c : a.causes)
    if (c.stage == "disk_read" || c.stage == "transform" || c.stage == "pin") return true;
  return false;
}

}  // namespace

// The control: without splits, and with splits that show no waiting, the loaders' own stage is blamed.
TEST(AnalysisCores, WithoutWaitsForACoreTheLoaderStageIsBlamed) {
  ddp::Analysis plain = run_analysis(marginal_loaders(), "cores_plain");
  ASSERT_FALSE(plain.causes.empty()) << describe(plain);
  EXPECT_EQ(plain.causes[0].stage, "disk_read") << describe(plain);
  EXPECT_TRUE(plain.cpu.empty()) << "no splits, no host";

  Sim idle = marginal_loaders();
  idle.cores = 2;  // splits, all on a CPU
  ddp::Analysis a = run_analysis(idle, "cores_idle");
  ASSERT_EQ(a.cpu.size(), 1u) << describe(a);
  EXPECT_FALSE(a.cpu[0].saturated);
  EXPECT_EQ(a.cpu[0].cores, 2);
  EXPECT_NEAR(a.cpu[0].stretch, 0, 1e-3);
  EXPECT_EQ(a.causes[0].stage, "disk_read") << describe(a);
}

// Waits for a core that the loaders would not have on enough cores: the cores are blamed, with the runnable threads
// processor sharing gives, and no loader stage is.
TEST(AnalysisCores, ASaturatedHostIsBlamedInsteadOfTheStagesThatWaitForItsCores) {
  ddp::Analysis a = run_analysis(saturated(marginal_loaders()), "cores_saturated");
  ASSERT_EQ(a.cpu.size(), 1u) << describe(a);
  const ddp::HostCpu& h = a.cpu[0];
  EXPECT_TRUE(h.saturated) << describe(a);
  EXPECT_EQ(h.ranks, (std::vector<int>{0, 1}));
  EXPECT_GE(h.stretch, ddp::kCpuSaturatedStretch);
  EXPECT_NEAR(h.runnable, h.cores * (1 + h.stretch), 1e-9);
  EXPECT_EQ(h.culprit_rank, -1) << "balanced ranks: no culprit";
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes[0].stage, "cpu") << describe(a);
  EXPECT_EQ(a.causes[0].rank, -1) << describe(a);
  EXPECT_FALSE(names_a_loader_stage(a)) << describe(a);
  EXPECT_EQ(a.verdict.rfind("CPU saturated", 0), 0u) << a.verdict;
  EXPECT_NE(a.causes[0].explanation.find("runnable threads on 2 cores"), std::string::npos) << a.causes[0].explanation;
  for (const auto& r : a.ranks) EXPECT_GT(r.loader.cpu_wait_ms_per_batch, 0.5 * r.loader.batch_ms);

  // More cores for the same waits: fewer runnable threads on each, the same stretch; still the cores' doing.
  ddp::Analysis wide = run_analysis(saturated(marginal_loaders(), 8), "cores_wide");
  ASSERT_EQ(wide.cpu.size(), 1u);
  EXPECT_EQ(wide.cpu[0].cores, 8);
  EXPECT_NEAR(wide.cpu[0].stretch, h.stretch, 1e-3);
}

// The kernel kept no run-queue statistics: CPU time only, and no host is called saturated on a guess.
TEST(AnalysisCores, WaitsNotKnownSayNothingOfTheCores) {
  Sim sim = marginal_loaders();
  sim.cores = 2;
  for (RankKnobs& k : sim.rank) k.loader_wait_share = k.wait_share = -1;
  ddp::Analysis a = run_analysis(sim, "cores_unknown");
  ASSERT_EQ(a.cpu.size(), 1u);
  EXPECT_FALSE(a.cpu[0].saturated);
  EXPECT_EQ(a.causes[0].stage, "disk_read") << describe(a);
}

// A loader too slow even on enough cores is still its stage's cause, saturated host or not.
TEST(AnalysisCores, ALoaderTooSlowOnAnyCoresKeepsItsStage) {
  Sim sim = marginal_loaders();
  for (RankKnobs& k : sim.rank) k.disk_read = 80;  // 87 ms a batch over 2 workers against ~17 ms of compute
  ddp::Analysis a = run_analysis(saturated(sim), "cores_slow_loader");
  ASSERT_TRUE(a.cpu.size() == 1u && a.cpu[0].saturated) << describe(a);
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes[0].stage, "disk_read") << describe(a);
}

// One rank's busy transform is what the cores are short of: the waits the saturation causes, its own rank's input
// and the other rank's exposed collective, are charged to it, said with the CPU above the other rank's.
TEST(AnalysisCores, TheRankWhoseCpuSaturatesTheHostIsBlamedForItsWaits) {
  Sim sim = saturated(Sim{});
  sim.rank[1].transform = 60;  // 61.5 ms a batch over 2 workers against ~17 ms of compute, all of it CPU work
  ddp::Analysis a = run_analysis(sim, "cores_culprit");
  ASSERT_EQ(a.cpu.size(), 1u);
  const ddp::HostCpu& h = a.cpu[0];
  ASSERT_TRUE(h.saturated) << describe(a);
  EXPECT_EQ(h.culprit_rank, 1) << describe(a);
  EXPECT_EQ(h.culprit_stage, "transform");
  EXPECT_GE(h.culprit_excess_ms_per_step, ddp::kContentionCulpritShare * h.cpu_ms_per_step);
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes[0].stage, "transform") << describe(a);
  EXPECT_EQ(a.causes[0].rank, 1) << describe(a);
  EXPECT_EQ(a.causes[0].evidence["saturates_host"], "vm") << a.causes[0].evidence.dump();
  for (const auto& c : a.causes) EXPECT_NE(c.stage, "cpu") << describe(a);
  for (const auto& c : a.causes) EXPECT_FALSE(c.rank == -1 && c.stage == "allreduce") << describe(a);
}
