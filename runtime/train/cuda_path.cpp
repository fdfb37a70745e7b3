#include "runtime/train/cuda_path.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "profiler/recorder.h"
#include "runtime/train/torch_compat.h"

#if DDP_PROFILE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CachingHostAllocator.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace ddp::cuda {

#if DDP_PROFILE_CUDA
bool built_with_cuda() { return true; }
#else
bool built_with_cuda() { return false; }
#endif

// ---- device ----------------------------------------------------------------------------------------------------

DeviceInfo probe(int index) {
  DeviceInfo d;
#if DDP_PROFILE_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    d.why_none = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear it, so later CUDA calls start clean
    return d;
  }
  d.count = n;
  if (n == 0) {
    d.why_none = "no CUDA device";
    return d;
  }
  if (index < 0 || index >= n) return d;
  d.index = index;
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  d.name = p->name;
  d.cc_major = p->major;
  d.cc_minor = p->minor;
  d.total_bytes = p->totalGlobalMem;
  d.bf16 = p->major >= 8;
#else
  (void)index;
  d.why_none = "this build of ddp_profile is CPU-only";
#endif
  return d;
}

void use_device(int index) {
#if DDP_PROFILE_CUDA
  if (index >= 0) c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

records::cuda_versions versions(const DeviceInfo& d) {
  records::cuda_versions v;
#if DDP_PROFILE_CUDA
  int rt = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
    v.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
  if (at::detail::getCUDAHooks().hasCuDNN()) v.cudnn = at::detail::getCUDAHooks().versionCuDNN();
  if (d.index >= 0) {
    v.device = d.name;
    v.compute_capability = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
    v.device_memory_bytes = d.total_bytes;
  }
#else
  (void)d;
#endif
  return v;
}

// ---- staging memory ----------------------------------------------------------------------------------------------

namespace {
void* aligned_block(size_t n) { return std::aligned_alloc(64, (n + 63) / 64 * 64); }

#if DDP_PROFILE_CUDA
// Pinned blocks from the caching host allocator, owned here by their DataPtr until released.
struct PinnedPool {
  std::mutex mu;
  std::unordered_map<void*, c10::DataPtr> blocks;
};
#endif
}  // namespace

StagingAllocator staging_allocator(bool pinned) {
#if DDP_PROFILE_CUDA
  if (pinned) {
    auto pool = std::make_shared<PinnedPool>();
    return StagingAllocator{[pool](size_t n) -> void* {
                              c10::DataPtr p = at::getHostAllocator(at::kCUDA)->allocate(n);
                              void* raw = p.get();
                              std::lock_guard<std::mutex> lock(pool->mu);
                              pool->blocks.emplace(raw, std::move(p));
                              return raw;
                            },
                            [pool](void* raw) {
                              std::lock_guard<std::mutex> lock(pool->mu);
                              pool->blocks.erase(raw);  // back to the allocator's cache
                            }};
  }
#else
  (void)pinned;
#endif
  return StagingAllocator{[](size_t n) { return aligned_block(n); }, [](void* p) { std::free(p); }};
}

// ---- host -> device ----------------------------------------------------------------------------------------------

// CPU devices (CPU builds, or a CUDA build running its CPU path) copy synchronously and are done at once.
struct H2DCopier::Impl {
  std::deque<StagedBatch*> done;
#if DDP_PROFILE_CUDA
  explicit Impl(c10::DeviceIndex dev) : copy_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, dev)) {}
  Impl() = default;
  std::optional<c10::cuda::CUDAStream> copy_stream;
  std::deque<std::pair<StagedBatch*, at::cuda::CUDAEvent>> in_flight;
#endif
};

H2DCopier::H2DCopier(at::Device device, bool pinned) : device_(device), pinned_(pinned) {
#if DDP_PROFILE_CUDA
  if (device.is_cuda()) {
    impl_ = std::make_unique<Impl>(device.index() < 0 ? c10::cuda::current_device() : device.index());
    return;
  }
#endif
  if (!device.is_cpu()) throw std::invalid_argument("H2DCopier: unsupported device " + device.str());
  impl_ = std::make_unique<Impl>();
}

H2DCopier::~H2DCopier() = default;

H2DCopier::Batch H2DCopier::copy(StagedBatch* b, const std::vector<int64_t>& sample_shape) {
  const int64_t n = static_cast<int64_t>(b->samples);
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  at::Tensor hx = at::from_blob(b->x, shape, at::kFloat);
  at::Tensor hy = at::from_blob(b->y, {n}, at::kLong);
  Batch out;
#if DDP_PROFILE_CUDA
  if (impl_->copy_stream) {
    c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(impl_->copy_stream->device_index());
    at::cuda::CUDAEvent copied;
    {
      // Allocated and written on the copy stream; the compute stream waits for the event, and record_stream keeps
      // the caching allocator from reusing the memory before the compute stream is done with it.
      c10::cuda::CUDAStreamGuard guard(*impl_->copy_stream);
      out.x = hx.to(device_, /*non_blocking=*/pinned_, /*copy=*/true);
      out.y = hy.to(device_, pinned_, true);
      copied.record(*impl_->copy_stream);
    }
    copied.block(compute);
    out.x.record_stream(compute.unwrap());
    out.y.record_stream(compute.unwrap());
    impl_->in_flight.emplace_back(b, std::move(copied));
    return out;
  }
#endif
  out.x = hx.clone();
  out.y = hy.clone();
  impl_->done.push_back(b);
  return out;
}

std::vector<StagedBatch*> H2DCopier::finished(bool wait) {
  std::vector<StagedBatch*> out(impl_->done.begin(), impl_->done.end());
  impl_->done.clear();
#if DDP_PROFILE_CUDA
  while (!impl_->in_flight.empty()) {
    auto& [b, ev] = impl_->in_flight.front();
    if (wait)
      ev.synchronize();
    else if (!ev.query())
      break;
    out.push_back(b);
    impl_->in_flight.pop_front();
  }
#else
  (void)wait;
#endif
  return out;
}

// ---- autocast ----------------------------------------------------------------------------------------------------

Autocast::Autocast(AmpDtype dtype, bool cuda) : cuda_(cuda) {
  if (dtype == AmpDtype::off) return;
  const at::ScalarType t = dtype == AmpDtype::fp16 ? at::kHalf : at::kBFloat16;
  on_ = true;
  compat::set_autocast(cuda, true, t);
}

Autocast::~Autocast() {
  if (!on_) return;
  compat::set_autocast(cuda_, false, cuda_ ? at::kHalf : at::kBFloat16);
  compat::clear_autocast_cache();  // casts cached for this forward are not reused by the next
}

// ---- loss scaling --------------------------------------------------------------------------------------------------

at::Tensor unscale_and_check(const std::vector<at::Tensor>& params, double inv_scale) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  // The flag lives where the parameters do, so it can be reduced over NCCL too.
  if (grads.empty())
    return at::zeros({1}, params.empty() ? at::TensorOptions(at::kFloat) : params.front().options().dtype(at::kFloat));
  const at::Device dev = grads.front().device();
  at::Tensor found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(dev));
  if (dev.is_cuda()) {
    at::Tensor inv = at::full({1}, inv_scale, at::TensorOptions().dtype(at::kFloat).device(dev));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv);  // one fused pass, no host sync
    return found;
  }
  bool bad = false;
  for (auto& g : grads) {
    g.mul_(inv_scale);
    bad = bad || !at::isfinite(g).all().item<bool>();
  }
  if (bad) found.fill_(1.0);
  return found;
}

void synchronize(int device) {
#if DDP_PROFILE_CUDA
  if (device < 0) return;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

at::Tensor rng_state(int device) {
#if DDP_PROFILE_CUDA
  if (device >= 0) return at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(device)).get_state();
#else
  (void)device;
#endif
  return at::Tensor();
}

void set_rng_state(int device, const at::Tensor& state) {
#if DDP_PROFILE_CUDA
  if (device < 0) return;
  at::Generator g = at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
#else
  (void)device;
  (void)state;
#endif
}

// ---- memory ------------------------------------------------------------------------------------------------------

MemoryStats memory_stats(int device) {
  MemoryStats m;
#if DDP_PROFILE_CUDA
  // The caching allocator throws for a device index it does not have (torch 2.x without a driver, say): no device, no
  // bytes.
  if (device < 0 || device >= static_cast<int>(c10::cuda::device_count())) return m;
  auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  m.allocated = static_cast<uint64_t>(s.allocated_bytes[kAll].current);
  m.reserved = static_cast<uint64_t>(s.reserved_bytes[kAll].current);
  m.peak_allocated = static_cast<uint64_t>(s.allocated_bytes[kAll].peak);
#else
  (void)device;
#endif
  return m;
}

void record_memory_counters(int device) {
#if DDP_PROFILE_CUDA
  if (!prof::recording() || device < 0) return;
  MemoryStats m = memory_stats(device);
  prof::record_counter(Counter::cuda_allocated_bytes, m.allocated);
  prof::record_counter(Counter::cuda_reserved_bytes, m.reserved);
#else
  (void)device;
#endif
}

}  // namespace ddp::cuda
