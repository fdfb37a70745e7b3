// The stage table (traces/model/stages.def): ids and names are on disk and in JSON, so they are pinned here; the kind
// flags must pick exactly the subsets the analysis, the exporters, the viewer and `--slow` relied on before the table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "traces/model/stages.h"

namespace {

using ddp::Stage;

std::vector<Stage> with(ddp::StageFlag f) {
  std::vector<Stage> out;
  for (int i = 0; i < ddp::kStageCount; ++i)
    if (ddp::stage_has(static_cast<Stage>(i), f)) out.push_back(static_cast<Stage>(i));
  return out;
}

TEST(Stages, IdsAndNamesAreTheOnDiskOnes) {
  const std::vector<std::string> names = {
      "disk_read", "transform", "pin",        "h2d",        "wait_data", "forward",    "backward",    "allreduce",
      "wait_comm", "optimizer", "checkpoint", "step",       "kernel",    "memcpy_h2d", "memcpy_d2h",  "memset",
      "nccl",      "cuda_api",  "sync",       "memcpy_d2d", "wait_gpu",  "collate",    "worker_start"};
  ASSERT_EQ(ddp::kStageCount, static_cast<int>(names.size()));
  for (int i = 0; i < ddp::kStageCount; ++i) {
    EXPECT_EQ(ddp::stage_name(static_cast<Stage>(i)), names[i]);
    EXPECT_EQ(ddp::stage_from_name(names[i]), static_cast<Stage>(i));
  }
  EXPECT_EQ(ddp::stage_name(static_cast<Stage>(200)), "unknown");
  EXPECT_FALSE(ddp::stage_from_name("no_such_stage"));
  EXPECT_EQ(static_cast<int>(Stage::wait_gpu), 20);
  EXPECT_EQ(static_cast<int>(Stage::worker_start), 22);
}

TEST(Stages, CountersKeepTheirIdsAndNames) {
  const std::vector<std::string> names = {"host_rss_bytes", "cuda_allocated_bytes", "cuda_reserved_bytes",
                                          "loader_queue_depth"};
  ASSERT_EQ(ddp::kCounterCount, static_cast<int>(names.size()));
  for (int i = 0; i < ddp::kCounterCount; ++i) {
    EXPECT_EQ(ddp::counter_name(static_cast<ddp::Counter>(i)), names[i]);
    EXPECT_EQ(ddp::counter_from_name(names[i]), static_cast<ddp::Counter>(i));
  }
  EXPECT_EQ(ddp::counter_name(static_cast<ddp::Counter>(99)), "unknown");
}

TEST(Stages, EveryStageHasAnOpaqueColourOfItsOwn) {
  for (int i = 0; i < ddp::kStageCount; ++i) {
    const uint32_t c = ddp::stage_color(static_cast<Stage>(i));
    EXPECT_EQ(c >> 24, 0xFFu) << ddp::stage_name(static_cast<Stage>(i));
    for (int j = 0; j < i; ++j) EXPECT_NE(c, ddp::stage_color(static_cast<Stage>(j)));
  }
  // Colours the viewer tests and NVTX ranges rely on.
  EXPECT_EQ(ddp::stage_color(Stage::forward), 0xFF2E8CF0u);
  EXPECT_EQ(ddp::stage_color(Stage::wait_gpu), 0xFF2848A8u);
  EXPECT_EQ(ddp::stage_color(static_cast<Stage>(200)), 0xFFFFFFFFu);
}

TEST(Stages, FlagsPickTheSubsetsTheCodeUses) {
  using V = std::vector<Stage>;
  EXPECT_EQ(with(ddp::kStageWait), (V{Stage::wait_data, Stage::wait_comm, Stage::wait_gpu}));
  EXPECT_EQ(with(ddp::kStageDataPath),
            (V{Stage::disk_read, Stage::transform, Stage::pin, Stage::h2d, Stage::collate, Stage::worker_start}));
  // worker_start is not a per-batch loader stage (docs/stalls.md): a wait during it is the start-up's.
  EXPECT_EQ(with(ddp::kStageLoaderThread), (V{Stage::disk_read, Stage::transform, Stage::pin, Stage::collate}));
  EXPECT_EQ(with(ddp::kStageGpuActivity),
            (V{Stage::kernel, Stage::memcpy_h2d, Stage::memcpy_d2h, Stage::memset, Stage::nccl, Stage::memcpy_d2d}));
  EXPECT_EQ(with(ddp::kStageCudaHost), (V{Stage::cuda_api, Stage::sync}));
  EXPECT_EQ(with(ddp::kStageMainThread), (V{Stage::h2d, Stage::wait_data, Stage::forward, Stage::backward,
                                            Stage::wait_comm, Stage::optimizer, Stage::checkpoint, Stage::wait_gpu}));
  EXPECT_EQ(with(ddp::kStageDelaysCollective), (V{Stage::h2d, Stage::wait_data, Stage::forward, Stage::backward,
                                                  Stage::optimizer, Stage::checkpoint, Stage::wait_gpu}));
  EXPECT_EQ(with(ddp::kStageCommunication), (V{Stage::allreduce, Stage::nccl}));
  EXPECT_EQ(with(ddp::kStageBookkeeping), (V{Stage::checkpoint, Stage::step}));
  EXPECT_EQ(with(ddp::kStageSlowable), (V{Stage::disk_read, Stage::transform, Stage::pin, Stage::h2d, Stage::forward,
                                          Stage::backward, Stage::optimizer}));
  EXPECT_EQ(with(ddp::kStageHost).size(), 15u);  // stages 0..11, wait_gpu, collate, worker_start
}

TEST(Stages, CompileTimeListsMatchTheQueries) {
  constexpr auto waits = ddp::stages_with<ddp::kStageWait>();
  static_assert(waits.size() == 3);
  EXPECT_EQ(std::vector<Stage>(waits.begin(), waits.end()), with(ddp::kStageWait));
  static_assert(ddp::is_wait(Stage::wait_comm) && !ddp::is_wait(Stage::allreduce));
  static_assert(ddp::is_data_stage(Stage::h2d) && !ddp::is_data_stage(Stage::memcpy_h2d));
  static_assert(ddp::is_gpu_activity(Stage::memcpy_d2d) && !ddp::is_gpu_activity(Stage::cuda_api));
  static_assert(ddp::is_cuda_host(Stage::sync) && !ddp::is_cuda_host(Stage::wait_gpu));
}

TEST(Stages, SlowableNamesReadAsTheCliUsageText) {
  EXPECT_EQ(ddp::stage_names_with(ddp::kStageSlowable), "disk_read, transform, pin, h2d, forward, backward, optimizer");
  EXPECT_EQ(ddp::stage_names_with(ddp::kStageBlocksOnPeers), "allreduce, wait_comm, wait_gpu");
}

}  // namespace
