#pragma once
// AMP policy as pure logic: from `--amp auto|fp16|bf16|off`, the device and whether it computes in bf16, the dtype
// autocast uses and whether a loss scaler is needed. fp16's narrow exponent needs dynamic loss scaling; bf16 keeps
// fp32's exponent and needs none (as with torch.autocast + GradScaler).
#include <string>

namespace ddp {

enum class AmpDtype { off, fp16, bf16 };

struct AmpChoice {
  AmpDtype dtype = AmpDtype::off;
  bool scaler = false;  // a LossScaler must scale the loss and gate the step
  std::string reason;   // one line for the manifest: why this dtype
};

struct AmpRequest {
  std::string amp = "auto";     // auto, fp16, bf16, off
  bool cuda = false;            // the compute device is a CUDA GPU
  bool bf16_supported = false;  // the device computes in bf16 (CUDA: compute capability >= 8.0)
};

// Returns false with `error` set for a request that cannot be honoured (an unknown mode, fp16 on CPU, bf16 on a GPU
// without it). auto: fp16 on CUDA (with the scaler), off on CPU.
bool choose_amp(const AmpRequest& req, AmpChoice& out, std::string& error);

const char* amp_dtype_name(AmpDtype d);  // "off", "fp16", "bf16"

}  // namespace ddp
