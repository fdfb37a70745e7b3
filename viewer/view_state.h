#pragma once
// The visible time window and what is selected: pure arithmetic, no ImGui, so zoom and pan are unit tested.
#include <cstdint>

namespace ddp::viewer {

struct ViewState {
  int64_t t0 = 0, t1 = 1'000'000;            // visible time range, ns on the timeline's clock
  int64_t data_t0 = 0, data_t1 = 1'000'000;  // what the trace covers

  int64_t span() const { return t1 - t0; }
  double ns_per_px(double width_px) const { return width_px > 0 ? static_cast<double>(t1 - t0) / width_px : 1.0; }
  double x_of(int64_t t, double x0, double width_px) const {
    return x0 + static_cast<double>(t - t0) / ns_per_px(width_px);
  }
  int64_t t_of(double x, double x0, double width_px) const;

  void set_data_range(int64_t a, int64_t b);
  // Shows [a, b] plus a small margin on both sides.
  void fit(int64_t a, int64_t b, double margin = 0.02);
  void fit_all() { fit(data_t0, data_t1); }
  // factor < 1 zooms in, > 1 out; the time under `anchor` (0..1 across the width) stays put.
  void zoom(double anchor, double factor);
  // Moves the window by dx pixels of a width_px-wide track (drag right = earlier times).
  void pan_px(double dx_px, double width_px);

  static constexpr int64_t kMinSpan = 100;  // ns: deepest zoom
};

}  // namespace ddp::viewer
