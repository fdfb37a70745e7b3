#include "traces/base/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace ddp {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double lower_median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  p = std::clamp(p, 0.0, 1.0);  // outside [0, 1] there is no such element
  const size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double covering_percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  p = std::clamp(p, 0.0, 1.0);
  const size_t rank = std::max<size_t>(1, static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))));
  const size_t k = std::min(v.size(), rank) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace ddp
