#include "runtime/train/loss_scaler.h"

#include <cmath>
#include <limits>

namespace ddp {

LossScaler::LossScaler(LossScalerOptions opt) : opt_(opt), scale_(static_cast<float>(opt.init_scale)) {}

ScalerDecision LossScaler::update(bool found_inf) {
  if (!opt_.enabled) return ScalerDecision::step;
  if (found_inf) {
    scale_ = static_cast<float>(scale_ * opt_.backoff_factor);
    tracker_ = 0;
    ++skipped_;
    return ScalerDecision::skip;
  }
  const int64_t good = tracker_ + 1;
  if (good >= opt_.growth_interval) {
    const float grown = static_cast<float>(scale_ * opt_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    tracker_ = 0;
  } else {
    tracker_ = good;
  }
  return ScalerDecision::step;
}

LossScalerState LossScaler::state() const { return {scale_, tracker_, opt_.enabled}; }

bool LossScaler::load(const LossScalerState& s, std::string& error) {
  const float f = static_cast<float>(s.scale);
  if (!(s.scale > 0) || !std::isfinite(f) || static_cast<double>(f) != s.scale) {
    error = "loss scaler state: scale " + std::to_string(s.scale) + " is not a positive finite float32";
    return false;
  }
  if (s.growth_tracker < 0) {
    error = "loss scaler state: negative growth tracker " + std::to_string(s.growth_tracker);
    return false;
  }
  scale_ = f;
  tracker_ = s.growth_tracker;
  return true;
}

}  // namespace ddp
