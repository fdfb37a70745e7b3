#include "traces/base/rank_set.h"

#include <algorithm>

namespace ddp {
namespace {
constexpr size_t kListedInFull = 6;  // a set this small is listed rank by rank

std::string ordinal(int k) {
  const int tens = k % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : k % 10 == 1              ? "st"
                       : k % 10 == 2              ? "nd"
                       : k % 10 == 3              ? "rd"
                                                  : "th";
  return std::to_string(k) + suffix;
}
}  // namespace

std::string describe_ranks(std::vector<int> ranks, int world) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const size_t n = ranks.size();
  if (n == 0) return "no rank";
  if (n == 1) return "rank " + std::to_string(ranks[0]);
  const std::string count = std::to_string(n) + " ranks";
  if (world > 0 && static_cast<int>(n) == world && ranks.front() == 0 && ranks.back() == world - 1)
    return "all " + count;
  // Nearly everyone: said by who is missing.
  if (world > static_cast<int>(kListedInFull) && static_cast<int>(n) < world &&
      world - static_cast<int>(n) <= static_cast<int>(kListedInFull / 2) && ranks.front() >= 0 &&
      ranks.back() < world) {
    std::string missing;
    size_t k = 0;
    for (int r = 0; r < world; ++r) {
      while (k < n && ranks[k] < r) ++k;
      if (k == n || ranks[k] != r) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    const bool one = world - static_cast<int>(n) == 1;
    return "all " + std::to_string(world) + " ranks but " + (one ? "rank " : "ranks ") + missing;
  }
  const int step = ranks[1] - ranks[0];
  bool progression = true;
  for (size_t i = 2; i < n && progression; ++i) progression = ranks[i] - ranks[i - 1] == step;
  if (progression && step == 1)
    return "ranks " + std::to_string(ranks.front()) + "-" + std::to_string(ranks.back()) + " (" + count + ")";
  std::string out = "ranks ";
  if (n <= kListedInFull) {
    for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
    return out;
  }
  for (size_t i = 0; i < 3; ++i) out += std::to_string(ranks[i]) + ", ";
  out += "... " + std::to_string(ranks.back()) + " (" + count;
  if (progression) out += ", every " + ordinal(step);
  return out + ")";
}

std::string clip(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return text.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
}

}  // namespace ddp
