#pragma once
// Order statistics of a sample, one definition each, so every report means the same by "median".
#include <vector>

namespace ddp {

// The arithmetic mean. 0 for an empty sample.
double mean(const std::vector<double>& v);

// The middle value; for an even count the mean of the two middle values. 0 for an empty sample.
double median(std::vector<double> v);

// The nearest-rank percentile for a fraction p in [0, 1]: the element at index round(p * (n - 1)) of the sorted
// sample (p = 0.5 of an even count is the upper middle, unlike median()). 0 for an empty sample.
double percentile(std::vector<double> v, double p);

}  // namespace ddp
