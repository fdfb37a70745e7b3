// The memory growth rule (memory_growth.h).
#include "traces/analysis/memory_growth.h"

#include <algorithm>

#include "traces/base/stats.h"

namespace ddp {
namespace {

double median_of(std::vector<double> v, const GrowthRule& rule) {
  return rule.upper_median ? percentile(std::move(v), 0.5) : median(std::move(v));
}

// The window's parts' medians: window/parts samples each (at least one), the last to the window's end or its last
// window/parts samples, as the rule cuts them.
std::vector<double> part_medians(const std::vector<double>& w, const GrowthRule& rule) {
  const size_t n = w.size(), k = std::max<size_t>(n / std::max<size_t>(rule.parts, 1), 1);
  auto part = [&](size_t a, size_t b) {
    a = std::min(a, n), b = std::min(b, n);
    return median_of({w.begin() + static_cast<std::ptrdiff_t>(a), w.begin() + static_cast<std::ptrdiff_t>(b)}, rule);
  };
  std::vector<double> out;
  for (size_t i = 0; i + 1 < rule.parts; ++i) out.push_back(part(i * k, (i + 1) * k));
  out.push_back(rule.last_part_to_end ? part((rule.parts - 1) * k, n) : part(n - std::min(k, n), n));
  return out;
}

// Bytes per sample, Theil-Sen: the median of the slopes between every two samples. A one-time rise moves a
// least-squares fit by its whole size over the window; it moves the median of the pairwise slopes hardly at all,
// while a leak moves every one of them. At most kSlopePoints evenly spaced samples: the pairs grow with their square.
constexpr size_t kSlopePoints = 400;
double theil_sen_slope(const std::vector<double>& y, const GrowthRule& rule) {
  if (y.size() < 2) return 0;
  const size_t n = std::min(y.size(), kSlopePoints);
  std::vector<size_t> at(n);
  for (size_t k = 0; k < n; ++k) at[k] = k * (y.size() - 1) / (n - 1);
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) slopes.push_back((y[at[b]] - y[at[a]]) / static_cast<double>(at[b] - at[a]));
  return median_of(std::move(slopes), rule);
}

bool each_part_higher(const std::vector<double>& medians) {
  for (size_t i = 1; i < medians.size(); ++i)
    if (!(medians[i - 1] < medians[i])) return false;
  return true;
}

}  // namespace

MemoryGrowth memory_growth(const std::vector<double>& window, const GrowthRule& rule) {
  MemoryGrowth g;
  g.part_medians = part_medians(window, rule);
  g.rise = g.part_medians.back() - g.part_medians.front();
  if (rule.per_sample > 0) g.per_sample = theil_sen_slope(window, rule);
  g.median = median_of(window, rule);
  const bool steady = !rule.each_part_higher || each_part_higher(g.part_medians);
  const bool fast = rule.per_sample <= 0 || g.per_sample >= rule.per_sample;
  const bool far = rule.rise_exceeds ? g.rise > rule.rise : g.rise >= rule.rise;
  const bool far_share = rule.rise_share <= 0 || g.rise > rule.rise_share * g.part_medians.front();
  g.grows = steady && fast && far && far_share;
  return g;
}

}  // namespace ddp
