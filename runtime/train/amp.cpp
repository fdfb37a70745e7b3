#include "runtime/train/amp.h"

namespace ddp {

const char* amp_dtype_name(AmpDtype d) {
  switch (d) {
    case AmpDtype::fp16:
      return "fp16";
    case AmpDtype::bf16:
      return "bf16";
    default:
      return "off";
  }
}

bool choose_amp(const AmpRequest& req, AmpChoice& out, std::string& error) {
  out = AmpChoice{};
  const std::string& m = req.amp;
  if (m == "off") {
    out.reason = "--amp off";
    return true;
  }
  if (m == "auto") {
    if (!req.cuda) {
      out.reason = "--amp auto on CPU: full fp32";
      return true;
    }
    out.dtype = AmpDtype::fp16;
    out.scaler = true;
    out.reason = "--amp auto on CUDA: fp16 autocast with dynamic loss scaling";
    return true;
  }
  if (m == "fp16") {
    if (!req.cuda) {
      error = "--amp fp16 needs a CUDA device (CPU autocast computes in bf16: use --amp bf16 or off)";
      return false;
    }
    out.dtype = AmpDtype::fp16;
    out.scaler = true;
    out.reason = "--amp fp16: fp16 autocast with dynamic loss scaling";
    return true;
  }
  if (m == "bf16") {
    if (req.cuda && !req.bf16_supported) {
      error = "--amp bf16: this GPU does not compute in bf16 (compute capability 8.0 or newer is needed)";
      return false;
    }
    out.dtype = AmpDtype::bf16;
    out.reason = req.cuda ? "--amp bf16: bf16 autocast, no loss scaling (fp32's exponent range)"
                          : "--amp bf16 on CPU: bf16 autocast, no loss scaling";
    return true;
  }
  error = "--amp must be auto, fp16, bf16 or off (got '" + m + "')";
  return false;
}

}  // namespace ddp
