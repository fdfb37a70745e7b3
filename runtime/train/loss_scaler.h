#pragma once
// Dynamic loss scaling with torch.amp.GradScaler's semantics, as pure logic (no LibTorch): the caller multiplies the
// loss by scale(), unscales gradients by 1/scale() (or inv_scale()), reduces a found_inf flag across ranks (a SUM
// allreduce: non-zero when any rank saw inf/NaN, so every rank sees the same value) and then asks update(found_inf)
// whether to run the optimizer step.
//
//   init 2^16, growth factor 2 after 2000 consecutive finite steps, backoff 0.5 on inf/NaN (the step is skipped and the
//   streak restarts). The scale is a float32, as in PyTorch; a growth that would overflow float32 keeps the scale.
//
// Given the same globally reduced found_inf every rank makes the same decision, so replicas stay identical.
#include <cstdint>
#include <string>

namespace ddp {

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() is 1, update() always steps
};

// What a checkpoint saves (the fields of GradScaler.state_dict() that change while training).
struct LossScalerState {
  double scale = 65536.0;
  int64_t growth_tracker = 0;  // consecutive finite steps since the last growth or backoff
  bool enabled = false;
};

enum class ScalerDecision { step, skip };

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions opt = {});

  bool enabled() const { return opt_.enabled; }
  double scale() const { return opt_.enabled ? scale_ : 1.0; }
  double inv_scale() const { return 1.0 / scale(); }
  int64_t growth_tracker() const { return tracker_; }

  // After gradients were unscaled and found_inf was reduced across ranks (1 when any rank saw inf/NaN): updates the
  // scale and says whether to run the optimizer step.
  ScalerDecision update(bool found_inf_any_rank);

  uint64_t steps_skipped() const { return skipped_; }

  LossScalerState state() const;
  // Restores a saved state. Returns false (and leaves the scaler unchanged) when the state is not usable: a scale that
  // is not a positive finite float32, or a negative tracker.
  bool load(const LossScalerState& s, std::string& error);

 private:
  LossScalerOptions opt_;
  double scale_;  // always a float32 value
  int64_t tracker_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace ddp
