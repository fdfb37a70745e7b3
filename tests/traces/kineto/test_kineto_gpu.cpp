// Real GPU traces of our own making: PyTorch 2.11's profiler with CUDA activity around tests/python/kineto_job.py on an
// H200 (tests/data/README.md, pytorch-2.11-gpu): two ranks sharing the GPU through Gloo with CUDA tensors, and one
// rank on NCCL. Kernels, memcpys by kind and launch flows are read into the run model, the ranks aligned, analysed
// and exported with the kernels' names.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/traces/kineto/kineto_test_files.h"
#include "traces/analysis/analysis.h"
#include "traces/chrome/chrome_export.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_import.h"

namespace {
using namespace ddp;
namespace fs = std::filesystem;

const std::string kGpu = ddptest::kKinetoData + "/pytorch-2.11-gpu";

RunTrace load_folder(const std::string& folder) {
  RunTrace run;
  std::string err;
  EXPECT_TRUE(load_kineto_run({folder}, KinetoStageMap{}, run, err)) << err;
  return run;
}

size_t count(const RankTrace& r, Stage s) {
  size_t n = 0;
  for (const Event& e : r.events) n += e.is_span() && e.stage_id() == s;
  return n;
}

TEST(KinetoGpu, TwoRanksOnOneGpuThroughGlooLoadAlignAnalyseAndExport) {
  RunTrace run = load_folder(kGpu + "/gloo2-cuda-h200");
  ASSERT_EQ(run.ranks.size(), 2u);
  for (const RankTrace& r : run.ranks) {
    // 20 profiled steps (plus warm-up) of forward, backward and AdamW: 600 kernels per rank in the files.
    EXPECT_EQ(count(r, Stage::kernel), 600u) << "rank " << r.rank;
    EXPECT_EQ(count(r, Stage::nccl), 0u) << "Gloo with CUDA tensors runs no NCCL kernel";
    // The batches (pinned -> device) and Gloo's own staging of each allreduce (device -> pinned -> device).
    EXPECT_EQ(count(r, Stage::memcpy_h2d), 60u) << "rank " << r.rank;
    EXPECT_EQ(count(r, Stage::memcpy_d2h), 20u) << "rank " << r.rank;
    EXPECT_EQ(count(r, Stage::memcpy_d2d), 80u) << "rank " << r.rank;
  }
  const nlohmann::json align = kineto_report_json(run)["clock_alignment"];
  EXPECT_TRUE(align[1]["measured"].get<bool>()) << align.dump();
  Analysis a = analyze(run);
  EXPECT_EQ(a.world, 2);
  EXPECT_GE(a.steps, 15u);
  ASSERT_EQ(a.gpu.size(), 2u) << "both ranks' GPU time is accounted";
  for (const GpuTime& g : a.gpu) {
    EXPECT_GT(g.compute_ms, 0.0);
    EXPECT_GT(g.memory_ms, 0.0);
    EXPECT_EQ(g.communication_ms, 0.0);
  }
  const std::string d = ddptest::kineto_temp_dir("gpu_export");
  ExportStats st;
  std::string err;
  ASSERT_TRUE(export_chrome(run, d + "/merged.json", st, err)) << err;
  ChromeTrace t = read_chrome_file(d + "/merged.json");
  ASSERT_TRUE(t.ok()) << t.status.message;
  size_t gemm = 0, htod = 0;
  for (const ChromeEvent& e : t.events) {
    gemm += e.ph == 'X' && e.name.find("gemm") != std::string::npos;
    htod += e.ph == 'X' && e.name.find("HtoD") != std::string::npos;
  }
  EXPECT_GT(gemm, 0u) << "kernels keep their function names in the export";
  EXPECT_EQ(htod, 120u) << "memcpys keep their kind";
  EXPECT_GT(st.flows, 0u) << "launch arrows kept";
  fs::remove_all(d);
}

TEST(KinetoGpu, OneNcclRankIsReadWithItsBackend) {
  RunTrace run = load_folder(kGpu + "/nccl1-h200");
  ASSERT_EQ(run.ranks.size(), 1u);
  EXPECT_EQ(count(run.ranks[0], Stage::kernel), 600u);
  // One rank: PyTorch's NCCL allreduce of a world of one launches no NCCL kernel.
  EXPECT_EQ(count(run.ranks[0], Stage::nccl), 0u);
  EXPECT_EQ(count(run.ranks[0], Stage::memcpy_h2d), 40u);
  Analysis a = analyze(run);
  EXPECT_EQ(a.world, 1);
  ASSERT_EQ(a.gpu.size(), 1u);
  EXPECT_GT(a.gpu[0].compute_ms, 0.0);
}

}  // namespace
