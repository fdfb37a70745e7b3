#pragma once
// The few LibTorch calls whose spelling differs between 1.13 (Debian's CPU LibTorch) and 2.x (the GPU tier's
// torch 2.11). Everything else in runtime/ uses the API common to both.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace ddp::compat {

inline at::Generator cpu_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// Enables/disables autocast on CUDA or the CPU with the given low-precision dtype.
inline void set_autocast(bool cuda, bool enabled, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  const at::DeviceType where = cuda ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(where, enabled);
  at::autocast::set_autocast_dtype(where, dtype);
#else
  if (cuda) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

inline void clear_autocast_cache() { at::autocast::clear_cache(); }

// Binds a process group's communicators to the rank's GPU (Backend::setBoundDeviceId, 2.3 on); older versions guess
// the device from the rank.
template <class Group>
void bind_device(Group& g, int cuda_device) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  g.setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_device)));
#else
  (void)g;
  (void)cuda_device;
#endif
}

}  // namespace ddp::compat

#include <torch/optim/optimizer.h>

#include <sstream>

namespace ddp::compat {
// Optimizer state is keyed by the parameter's TensorImpl: as a string in 1.13, as a raw pointer in later versions.
template <typename StateMap>
auto optimizer_state_key(const at::Tensor& p) {
  using Key = typename std::decay_t<StateMap>::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream o;  // the text 1.13's own optimizers use (c10::guts::to_string of the pointer)
    o << p.unsafeGetTensorImpl();
    return o.str();
  } else
    return static_cast<Key>(p.unsafeGetTensorImpl());
}
}  // namespace ddp::compat
