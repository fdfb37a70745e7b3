#pragma once
// The runtime's CUDA path: device probe, pinned staging memory, host->device copies on a dedicated stream, autocast,
// loss-scale unscaling with an inf/NaN check, and CUDA memory counters. It compiles in every build; without
// DDP_PROFILE_CUDA the CUDA parts report "CPU-only build" and the CPU parts (plain staging memory, CPU unscale) work.
// worker.cpp calls these (docs/gpu.md); nothing here decides policy (runtime/train/amp.h, device_plan.h do).
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/data/loader.h"
#include "runtime/train/amp.h"
#include "traces/model/records.h"

namespace ddp::cuda {

// True in builds with the CUDA path (DDP_PROFILE_CUDA).
bool built_with_cuda();

struct DeviceInfo {
  int count = 0;         // devices visible to this process
  std::string why_none;  // when count == 0: why ("this build is CPU-only", "no CUDA device", ...)
  int index = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  uint64_t total_bytes = 0;
  bool bf16 = false;  // compute capability >= 8.0
};
// Probes device `index` (when count > index). Never throws: a missing driver is a count of 0 with a reason.
DeviceInfo probe(int index = 0);
// Makes `index` the calling thread's current CUDA device (before creating the NCCL process group). No-op on CPU
// builds or index < 0.
void use_device(int index);
// The manifest's versions.cuda: the runtime, cuDNN and the device; each absent when unknown (CPU-only builds).
records::cuda_versions versions(const DeviceInfo& d);

// Staging memory for the loader. pinned: page-locked memory from LibTorch's CUDA caching host allocator (the same
// pool pin_memory() uses), so non_blocking copies are real DMA; otherwise 64-byte aligned pageable memory
// (the --pageable comparison, and CPU builds).
StagingAllocator staging_allocator(bool pinned);

// Host -> device copies of staged batches on a dedicated copy stream. copy() enqueues the two copies (non_blocking
// from pinned memory), records an event and makes the compute (current) stream wait for it on the GPU, so the host
// never waits and the copy overlaps whatever the GPU is still computing. The loader's staging slot may only be
// reused once the DMA has read it: finished() hands back the staged batches whose copies completed.
class H2DCopier {
 public:
  H2DCopier(at::Device device, bool pinned);
  ~H2DCopier();
  H2DCopier(const H2DCopier&) = delete;
  H2DCopier& operator=(const H2DCopier&) = delete;

  struct Batch {
    at::Tensor x;  // {samples, sample_shape...}, float32, on the device
    at::Tensor y;  // labels, int64, on the device
  };
  Batch copy(StagedBatch* b, const std::vector<int64_t>& sample_shape);
  // Staged batches whose copies are done (pass them to Loader::release). wait: block until all are.
  std::vector<StagedBatch*> finished(bool wait = false);
  bool pinned() const { return pinned_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  at::Device device_;
  bool pinned_;
};

// Autocast on the calling thread for the scope's lifetime (forward + loss); off: does nothing. CUDA: the dtype's CUDA
// autocast; CPU: bf16 CPU autocast.
class Autocast {
 public:
  Autocast(AmpDtype dtype, bool cuda);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_ = false, cuda_ = false;
};

// Multiplies every gradient by inv_scale in place and returns found_inf: a one-element float32 tensor on the
// gradients' device, 1 when any gradient holds inf/NaN. Allreduce it (SUM or MAX) before LossScaler::update so every
// rank takes the same decision. Gradients that are undefined are skipped.
at::Tensor unscale_and_check(const std::vector<at::Tensor>& params, double inv_scale);

// Waits until the device has finished all work queued on it (no-op in CPU builds).
void synchronize(int device);

// The default CUDA generator of `device` (dropout and torch.rand* on the GPU): its state as a CPU byte tensor, and
// restoring it. Undefined / no-op in CPU builds.
at::Tensor rng_state(int device);
void set_rng_state(int device, const at::Tensor& state);

// The caching allocator's counters for `device` (zeros on CPU builds).
struct MemoryStats {
  uint64_t allocated = 0, reserved = 0, peak_allocated = 0;
};
MemoryStats memory_stats(int device);
// Records cuda_allocated_bytes and cuda_reserved_bytes counter samples into the trace (no-op on CPU builds).
void record_memory_counters(int device);

}  // namespace ddp::cuda
