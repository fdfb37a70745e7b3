#include <gtest/gtest.h>

#include "runtime/train/device_plan.h"

namespace {
using namespace ddp;

DeviceRequest req(const char* device, const char* backend, bool cuda_build, int gpus, int local_rank, int local_world) {
  DeviceRequest r;
  r.device = device;
  r.backend = backend;
  r.cuda_build = cuda_build;
  r.visible_gpus = gpus;
  r.local_rank = local_rank;
  r.local_world = local_world;
  return r;
}

TEST(DevicePlan, OneGpuPerRankUsesNccl) {
  DevicePlan p;
  std::string err;
  ASSERT_TRUE(plan_device(req("auto", "auto", true, 2, 1, 2), p, err)) << err;
  EXPECT_TRUE(p.cuda);
  EXPECT_EQ(p.device_index, 1);
  EXPECT_EQ(p.backend, "nccl");
  EXPECT_FALSE(p.shared_gpu);
}

TEST(DevicePlan, TwoRanksOnOneGpuUseGlooWithCudaTensors) {
  DevicePlan p;
  std::string err;
  ASSERT_TRUE(plan_device(req("cuda", "auto", true, 1, 1, 2), p, err)) << err;
  EXPECT_TRUE(p.cuda);
  EXPECT_EQ(p.device_index, 0);
  EXPECT_EQ(p.backend, "gloo");
  EXPECT_TRUE(p.shared_gpu);
  EXPECT_NE(p.note.find("NCCL refuses"), std::string::npos) << p.note;
  EXPECT_FALSE(plan_device(req("cuda", "nccl", true, 1, 0, 2), p, err));
  EXPECT_NE(err.find("NCCL refuses two ranks on one GPU"), std::string::npos) << err;
}

TEST(DevicePlan, OneRankNcclOnOneGpu) {
  DevicePlan p;
  std::string err;
  ASSERT_TRUE(plan_device(req("cuda", "nccl", true, 1, 0, 1), p, err)) << err;
  EXPECT_EQ(p.backend, "nccl");
  EXPECT_EQ(p.device_index, 0);
}

TEST(DevicePlan, WithoutAGpuTheCpuPathRunsAndSaysWhy) {
  DevicePlan p;
  std::string err;
  DeviceRequest r = req("auto", "auto", true, 0, 0, 2);
  r.no_gpu_reason = "no NVIDIA driver";
  ASSERT_TRUE(plan_device(r, p, err)) << err;
  EXPECT_FALSE(p.cuda);
  EXPECT_EQ(p.backend, "gloo");
  EXPECT_NE(p.note.find("no NVIDIA driver"), std::string::npos);
  r.device = "cuda";
  EXPECT_FALSE(plan_device(r, p, err));
  EXPECT_NE(err.find("no NVIDIA driver"), std::string::npos);
  EXPECT_FALSE(plan_device(req("cuda", "auto", false, 4, 0, 1), p, err));
  EXPECT_NE(err.find("CPU-only"), std::string::npos);
  EXPECT_FALSE(plan_device(req("auto", "nccl", false, 0, 0, 1), p, err));
  EXPECT_FALSE(plan_device(req("cpu", "nccl", true, 1, 0, 1), p, err));
  ASSERT_TRUE(plan_device(req("cpu", "auto", true, 8, 0, 2), p, err));
  EXPECT_FALSE(p.cuda);
}

TEST(DevicePlan, RejectsUnknownNames) {
  DevicePlan p;
  std::string err;
  EXPECT_FALSE(plan_device(req("tpu", "auto", true, 1, 0, 1), p, err));
  EXPECT_FALSE(plan_device(req("auto", "mpi", true, 1, 0, 1), p, err));
}

}  // namespace
