#pragma once
// Order statistics of a sample, one definition each, so every report means the same by "median".
#include <vector>

namespace ddp {

// The arithmetic mean. 0 for an empty sample.
double mean(const std::vector<double>& v);

// The middle value; for an even count the mean of the two middle values. 0 for an empty sample.
double median(std::vector<double> v);

// The middle value; for an even count the lower of the two middle values, never a value between them. The replay's
// "as on the median rank" (traces/replay/replay_edits.cpp) sets a straggler's stage to a rank's measured one: of two
// ranks that is the faster, the one not at fault, not halfway between them. 0 for an empty sample.
double lower_median(std::vector<double> v);

// The nearest-rank percentile for a fraction p in [0, 1]: the element at index round(p * (n - 1)) of the sorted
// sample (p = 0.5 of an even count is the upper middle, unlike median()). 0 for an empty sample.
double percentile(std::vector<double> v, double p);

// The smallest element that at least a fraction p of the sample is at or below: the element of rank ceil(p * n)
// (1-based) of the sorted sample, the first for p = 0. Above percentile() where p * n falls just past an element
// (p = 0.9 of 19: the 18th against the 17th): a bound that at least p of the sample keeps, as the replay's
// step_error_p90 says of the steps. 0 for an empty sample.
double covering_percentile(std::vector<double> v, double p);

}  // namespace ddp
