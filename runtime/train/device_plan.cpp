#include "runtime/train/device_plan.h"

namespace ddp {

bool plan_device(const DeviceRequest& req, DevicePlan& out, std::string& error) {
  out = DevicePlan{};
  if (req.device != "auto" && req.device != "cpu" && req.device != "cuda") {
    error = "--device must be auto, cpu or cuda (got '" + req.device + "')";
    return false;
  }
  if (req.backend != "auto" && req.backend != "gloo" && req.backend != "nccl") {
    error = "--backend must be auto, gloo or nccl (got '" + req.backend + "')";
    return false;
  }
  const bool gpu_here = req.cuda_build && req.visible_gpus > 0;
  const std::string why_not = !req.cuda_build             ? "this build of ddp_profile is CPU-only"
                              : req.no_gpu_reason.empty() ? "no CUDA device is visible"
                                                          : req.no_gpu_reason;
  if (req.device == "cuda" && !gpu_here) {
    error = "--device cuda: " + why_not;
    return false;
  }
  if (req.device == "cpu" || !gpu_here) {
    if (req.backend == "nccl") {
      error =
          "--backend nccl needs CUDA devices (" + (req.device == "cpu" ? std::string("--device cpu") : why_not) + ")";
      return false;
    }
    out.backend = "gloo";
    out.note = req.device == "cpu" ? "CPU (--device cpu), Gloo" : "CPU and Gloo: " + why_not;
    return true;
  }
  out.cuda = true;
  const int local_world = req.local_world < 1 ? 1 : req.local_world;
  out.shared_gpu = req.visible_gpus < local_world;
  out.device_index = req.local_rank % req.visible_gpus;
  const std::string where = "cuda:" + std::to_string(out.device_index);
  if (out.shared_gpu) {
    if (req.backend == "nccl") {
      error = "--backend nccl: " + std::to_string(local_world) + " ranks on this host share " +
              std::to_string(req.visible_gpus) + " GPU(s), and NCCL refuses two ranks on one GPU (use --backend gloo)";
      return false;
    }
    out.backend = "gloo";
    out.note = where + ", shared by " + std::to_string(local_world) + " ranks on " + std::to_string(req.visible_gpus) +
               " GPU(s): Gloo with CUDA tensors (NCCL refuses two ranks on one GPU)";
    return true;
  }
  out.backend = req.backend == "auto" ? "nccl" : req.backend;
  out.note =
      where + ", one GPU per rank, " + (out.backend == "nccl" ? "NCCL" : "Gloo with CUDA tensors (--backend gloo)");
  return true;
}

}  // namespace ddp
