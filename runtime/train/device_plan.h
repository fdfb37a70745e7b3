#pragma once
// Which device each rank computes on and which process group it uses, as pure logic (no LibTorch, no CUDA): from
// --device auto|cpu|cuda, --backend auto|gloo|nccl, the GPUs this process sees and the ranks on this host.
//
//   one GPU per local rank  -> cuda:<local_rank>, NCCL (auto)
//   fewer GPUs than ranks   -> ranks share GPUs (local_rank % gpus); NCCL refuses two ranks on one GPU, so auto picks
//                              Gloo with CUDA tensors, and an explicit --backend nccl is an error
//   no GPU (or a CPU build) -> CPU and Gloo; --device cuda is an error that says why
#include <string>

namespace ddp {

struct DeviceRequest {
  std::string device = "auto";   // auto, cpu, cuda
  std::string backend = "auto";  // auto, gloo, nccl
  bool cuda_build = false;       // this binary has the CUDA path
  int visible_gpus = 0;          // devices this process can use (0 when there is no driver)
  std::string no_gpu_reason;     // why visible_gpus is 0, for messages ("no NVIDIA driver", ...)
  int local_rank = 0;
  int local_world = 1;  // ranks on this host
};

struct DevicePlan {
  bool cuda = false;
  int device_index = -1;    // CUDA device for this rank
  std::string backend;      // gloo or nccl
  bool shared_gpu = false;  // more ranks than GPUs on this host
  std::string note;         // one line for the manifest: what was chosen and why
};

// Returns false with `error` (a usage error) when the request cannot be met.
bool plan_device(const DeviceRequest& req, DevicePlan& out, std::string& error);

}  // namespace ddp
