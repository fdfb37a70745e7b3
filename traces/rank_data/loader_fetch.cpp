#include "traces/rank_data/loader_fetch.h"

#include <algorithm>

namespace ddp::rank_data {
namespace {

// A fetch takes its spans' splits summed; one span without a split (or without its wait) leaves it unknown.
void add_split(Fetch& f, const SpanSplit& s, bool first) {
  if (!first && f.cpu < 0) return;
  if (!s.known()) {
    f.cpu = f.wait = -1;
    return;
  }
  f.cpu = (first ? 0 : f.cpu) + int64_t{s.cpu_us} * 1000;
  f.wait = s.wait_known() && (first || f.wait >= 0) ? (first ? 0 : f.wait) + int64_t{s.wait_us} * 1000 : -1;
}

}  // namespace

std::unordered_map<uint64_t, Fetch> fetched_batches(const RankData& d) {
  std::unordered_map<uint64_t, std::map<uint8_t, Fetch>> by_lane;
  for (size_t i = 0; i < d.loader.size(); ++i) {
    const Span& s = d.loader[i];
    Fetch& f = by_lane[sync_key(s.step, s.micro)][s.lane];
    const bool first = f.stages.empty();
    if (first) f.lane = s.lane, f.start = s.t0, f.end = s.t1, f.pass = s.epoch;
    f.start = std::min(f.start, s.t0);
    f.end = std::max(f.end, s.t1);
    f.stages[s.stage] += s.dur();
    add_split(f, i < d.loader_cpu.size() ? d.loader_cpu[i] : SpanSplit{}, first);
  }
  std::unordered_map<uint64_t, Fetch> fetched;
  for (auto& [sync, lanes] : by_lane) {
    auto most = std::max_element(lanes.begin(), lanes.end(),
                                 [](const auto& a, const auto& b) { return a.second.spent() < b.second.spent(); });
    fetched[sync] = std::move(most->second);
  }
  return fetched;
}

int64_t queue_depth_seen(const std::vector<std::pair<int64_t, int64_t>>& start_take) {
  int64_t deepest = 0;
  for (size_t n = 0; n < start_take.size(); ++n) {
    int64_t depth = 1;
    for (size_t m = 0; m < n; ++m) depth += start_take[m].second > start_take[n].first;
    deepest = std::max(deepest, depth);
  }
  return deepest;
}

}  // namespace ddp::rank_data
