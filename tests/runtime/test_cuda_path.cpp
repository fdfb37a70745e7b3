// The CUDA path's CPU side (runs in every build, GPU or not): staging memory, the copier's CPU fallback, unscaling with
// the inf/NaN check, autocast scopes and the device probe's answer without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "runtime/train/cuda_path.h"

namespace {
using namespace ddp;

bool has_gpu() { return std::filesystem::exists("/dev/nvidiactl"); }

TEST(CudaPath, ProbeSaysWhyThereIsNoDevice) {
  cuda::DeviceInfo d = cuda::probe(0);
  if (has_gpu() && cuda::built_with_cuda()) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(d.count, 0);
  EXPECT_FALSE(d.why_none.empty());
  if (!cuda::built_with_cuda()) {
    EXPECT_NE(d.why_none.find("CPU-only"), std::string::npos);
  }
  auto v = cuda::versions(d);
  EXPECT_FALSE(v.device.has_value());
  EXPECT_EQ(cuda::memory_stats(0).allocated, 0u);
  cuda::record_memory_counters(0);  // no recorder, no device: nothing happens
}

TEST(CudaPath, PageableStagingMemoryIsAlignedAndReleasable) {
  StagingAllocator a = cuda::staging_allocator(/*pinned=*/false);
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  a.release(p);
}

TEST(CudaPath, CpuCopierHandsBatchesBackAtOnce) {
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t y[2] = {0, 1};
  StagedBatch b;
  b.samples = 2;
  b.x = x;
  b.y = y;
  cuda::H2DCopier c(at::kCPU, /*pinned=*/false);
  auto out = c.copy(&b, {3});
  x[0] = 100;  // the copy owns its memory
  EXPECT_EQ(out.x.sizes(), (at::IntArrayRef{2, 3}));
  EXPECT_EQ(out.x[0][0].item<float>(), 1.0f);
  EXPECT_EQ(out.y[1].item<int64_t>(), 1);
  auto done = c.finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], &b);
  EXPECT_TRUE(c.finished().empty());
}

TEST(CudaPath, UnscaleDividesAndFlagsInfOrNan) {
  at::Tensor w = at::ones({3});
  w.mutable_grad() = at::full({3}, 1024.0);
  at::Tensor v = at::ones({2});
  v.mutable_grad() = at::full({2}, 2048.0);
  at::Tensor unused = at::ones({1});  // no grad: skipped
  at::Tensor found = cuda::unscale_and_check({w, v, unused}, 1.0 / 1024.0);
  EXPECT_EQ(found.item<float>(), 0.0f);
  EXPECT_EQ(w.grad()[0].item<float>(), 1.0f);
  EXPECT_EQ(v.grad()[1].item<float>(), 2.0f);
  v.mutable_grad()[0] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cuda::unscale_and_check({w, v}, 1.0).item<float>(), 1.0f);
  v.mutable_grad()[0] = std::nanf("");
  EXPECT_EQ(cuda::unscale_and_check({w, v}, 1.0).item<float>(), 1.0f);
  EXPECT_EQ(cuda::unscale_and_check({unused}, 1.0).item<float>(), 0.0f);
}

TEST(CudaPath, AutocastScopesNestCleanly) {
  { cuda::Autocast off(AmpDtype::off, false); }
  {
    cuda::Autocast bf16(AmpDtype::bf16, /*cuda=*/false);
    at::Tensor a = at::ones({4, 4}), b = at::ones({4, 4});
    at::Tensor c = at::mm(a, b);
    EXPECT_EQ(c.scalar_type(), at::kBFloat16) << "CPU autocast computes mm in bf16";
  }
  at::Tensor c = at::mm(at::ones({2, 2}), at::ones({2, 2}));
  EXPECT_EQ(c.scalar_type(), at::kFloat) << "autocast is off again after the scope";
}

}  // namespace
