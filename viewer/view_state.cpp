#include "viewer/view_state.h"

#include <algorithm>
#include <cmath>

namespace ddp::viewer {

int64_t ViewState::t_of(double x, double x0, double width_px) const {
  return t0 + static_cast<int64_t>(std::llround((x - x0) * ns_per_px(width_px)));
}

void ViewState::set_data_range(int64_t a, int64_t b) {
  data_t0 = a;
  data_t1 = std::max(b, a + kMinSpan);
}

void ViewState::fit(int64_t a, int64_t b, double margin) {
  if (b < a) std::swap(a, b);
  int64_t w = std::max<int64_t>(b - a, kMinSpan);
  auto pad = static_cast<int64_t>(static_cast<double>(w) * margin);
  t0 = a - pad;
  t1 = a + w + pad;
}

void ViewState::zoom(double anchor, double factor) {
  anchor = std::clamp(anchor, 0.0, 1.0);
  double w = static_cast<double>(t1 - t0);
  double nw = std::max(w * factor, static_cast<double>(kMinSpan));
  // never wider than 4x the data, so one cannot get lost far out
  double limit = std::max(4.0 * static_cast<double>(data_t1 - data_t0), static_cast<double>(kMinSpan));
  nw = std::min(nw, limit);
  double at = static_cast<double>(t0) + anchor * w;
  t0 = static_cast<int64_t>(std::llround(at - anchor * nw));
  t1 = t0 + static_cast<int64_t>(std::llround(nw));
}

void ViewState::pan_px(double dx_px, double width_px) {
  auto dt = static_cast<int64_t>(std::llround(-dx_px * ns_per_px(width_px)));
  int64_t w = t1 - t0;
  // keep some of the data on screen
  int64_t lo = data_t0 - w + w / 10, hi = data_t1 - w / 10;
  int64_t nt0 = std::clamp(t0 + dt, std::min(lo, hi), std::max(lo, hi));
  t0 = nt0;
  t1 = nt0 + w;
}

}  // namespace ddp::viewer
