#include "traces/rank_data/rank_data.h"

#include <limits>
#include <utility>

namespace ddp::rank_data {
namespace {

int find_main_lane(const RankTrace& t) {
  for (size_t i = 0; i < t.lanes.size(); ++i)
    if (t.lanes[i] == "main") return static_cast<int>(i);
  std::map<int, int> votes;
  for (const Event& e : t.events)
    if (e.is_span() && (e.stage_id() == Stage::forward || e.stage_id() == Stage::backward)) votes[e.lane]++;
  int best = -1, n = 0;
  for (auto [lane, c] : votes)
    if (c > n) best = lane, n = c;
  return best;
}

void extend_step(std::map<uint32_t, Interval>& steps, const Span& s) {
  auto [it, fresh] = steps.try_emplace(s.step, Interval{s.t0, s.t1});
  if (!fresh) it->second = {std::min(it->second.t0, s.t0), std::max(it->second.t1, s.t1)};
}

Span span_on_common_clock(const Event& e, int64_t offset) {
  Span s;
  s.t0 = e.t0 + offset;
  s.t1 = std::max(e.t1, e.t0) + offset;
  s.value = e.value;
  s.step = e.step;
  s.item = e.item;
  s.epoch = e.epoch;
  s.bucket = e.bucket;
  s.micro = e.micro;
  s.stage = e.stage_id();
  s.lane = e.lane;
  return s;
}

SpanSplit split_of(const SpanCpu* c) { return c ? SpanSplit{c->cpu_us, c->wait_us} : SpanSplit{}; }

// Sorts `spans` by start, their splits (when any) along with them.
void sort_by_start(std::vector<Span>& spans, std::vector<SpanSplit>& splits) {
  auto by_t0 = [](const Span& a, const Span& b) { return a.t0 < b.t0; };
  if (splits.empty()) return std::sort(spans.begin(), spans.end(), by_t0);
  std::vector<uint32_t> order(spans.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return by_t0(spans[a], spans[b]); });
  std::vector<Span> s(spans.size());
  std::vector<SpanSplit> c(splits.size());
  for (size_t k = 0; k < order.size(); ++k) s[k] = spans[order[k]], c[k] = splits[order[k]];
  spans = std::move(s);
  splits = std::move(c);
}

// Sorts every event into steps, counters and the span lists the rules read.
void sort_events(const RankTrace& t, RankData& d) {
  const int64_t off = t.clock_offset_ns();
  const int main_lane = find_main_lane(t);
  const bool splits = !t.cpu.empty();
  SpanCpuCursor cpu(t.cpu);
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    const SpanCpu* c = splits ? cpu.at(i) : nullptr;
    if (!e.is_span()) {
      if (e.stage < kCounterCount) d.counters[e.stage].push_back({e.t0 + off, e.value});
      continue;
    }
    if (e.stage >= kStageCount) continue;
    const Span s = span_on_common_clock(e, off);
    if (s.stage == Stage::step) {
      extend_step(d.steps, s);
    } else if (s.stage == Stage::worker_start) {
      d.starts.push_back(s);
    } else if (stage_has(s.stage, kStageLoaderThread)) {
      d.loader.push_back(s);
      if (splits) d.loader_cpu.push_back(split_of(c));
      d.loader_lanes.insert(s.lane);
    } else if (s.stage == Stage::allreduce) {
      d.allreduce.push_back(s);
    } else if (stage_has(s.stage, kStageMainThread) && static_cast<int>(s.lane) == main_lane) {
      d.main.push_back(s);
      if (splits) d.main_cpu.push_back(split_of(c));
    } else {
      d.other.push_back(s);
    }
  }
  auto by_t0 = [](const Span& a, const Span& b) { return a.t0 < b.t0; };
  sort_by_start(d.main, d.main_cpu);
  std::sort(d.allreduce.begin(), d.allreduce.end(), by_t0);
  std::sort(d.starts.begin(), d.starts.end(), by_t0);
  for (auto& c : d.counters) std::sort(c.begin(), c.end(), [](const Sample& a, const Sample& b) { return a.t < b.t; });
}

// Numbers buckets without an id, and records each bucket's launch and each sync's completion.
void index_allreduce(RankData& d) {
  d.launch.reserve(d.allreduce.size());
  // Buckets without an id are numbered by launch order inside their sync.
  std::map<std::pair<uint32_t, uint8_t>, uint16_t> ordinal;
  for (Span& s : d.allreduce) {
    uint16_t& n = ordinal[{s.step, s.micro}];
    if (s.bucket == kNoBucket) s.bucket = n;
    ++n;
    auto [it, fresh] = d.launch.try_emplace(bucket_key(s.step, s.micro, s.bucket), s.t0);
    if (!fresh) it->second = std::min(it->second, s.t0);
    auto [dn, fresh_done] = d.sync_done.try_emplace(sync_key(s.step, s.micro), s.t1);
    if (!fresh_done) dn->second = std::max(dn->second, s.t1);
  }
  for (size_t i = 0; i < d.allreduce.size(); ++i) d.ar_by_step[d.allreduce[i].step].push_back(i);
}

// Indexes the main lane by step, collects its wait_comm spans and merges its compute (forward/backward) time.
void index_main_lane(RankData& d) {
  for (size_t i = 0; i < d.main.size(); ++i) {
    const Span& s = d.main[i];
    d.main_by_step[s.step].push_back(i);
    if (s.stage == Stage::wait_comm) d.wait_comm.push_back(s);
    if (s.stage == Stage::forward || s.stage == Stage::backward) {
      if (!d.compute.empty() && s.t0 <= d.compute.back().t1)
        d.compute.back().t1 = std::max(d.compute.back().t1, s.t1);
      else
        d.compute.push_back({s.t0, s.t1});
    }
  }
}

// Other spans (GPU activity) may not carry a step: they belong to the step whose span holds their start.
void assign_other_spans_to_steps(RankData& d) {
  std::vector<std::pair<Interval, uint32_t>> by_time;
  for (const auto& [step, iv] : d.steps) by_time.push_back({iv, step});
  std::sort(by_time.begin(), by_time.end(), [](const auto& x, const auto& y) { return x.first.t0 < y.first.t0; });
  for (Span& s : d.other) {
    auto it = std::upper_bound(by_time.begin(), by_time.end(), s.t0,
                               [](int64_t at, const std::pair<Interval, uint32_t>& x) { return at < x.first.t0; });
    if (it == by_time.begin()) continue;
    --it;
    if (s.t0 < it->first.t1) s.step = it->second;
  }
}

void choose_analysed_steps(RankData& d) {
  for (const auto& kv : d.steps) d.analysed.push_back(kv.first);
  if (d.analysed.size() >= kWarmupMinSteps) d.analysed.erase(d.analysed.begin());  // warm-up
  if (!d.analysed.empty() && d.analysed.back() - d.analysed.front() < (1u << 26)) {
    d.analysed_mask.assign(static_cast<size_t>(d.analysed.back() - d.analysed.front()) + 1, 0);
    for (uint32_t s : d.analysed) d.analysed_mask[s - d.analysed.front()] = 1;
  }
}

}  // namespace

RankData prepare(const RankTrace& t) {
  RankData d;
  d.trace = &t;
  d.rank = static_cast<int>(t.rank);
  sort_events(t, d);
  // A trace without step spans (older runtime, or cut short): a step is the extent of its main-lane spans.
  if (d.steps.empty())
    for (const Span& s : d.main) extend_step(d.steps, s);
  index_allreduce(d);
  index_main_lane(d);
  assign_other_spans_to_steps(d);
  choose_analysed_steps(d);
  return d;
}

int64_t overlap_with(const std::vector<Interval>& v, int64_t a, int64_t b) {
  if (b <= a || v.empty()) return 0;
  auto it = std::upper_bound(v.begin(), v.end(), a, [](int64_t x, const Interval& i) { return x < i.t0; });
  if (it != v.begin()) --it;
  int64_t sum = 0;
  for (; it != v.end() && it->t0 < b; ++it) sum += std::max<int64_t>(0, std::min(b, it->t1) - std::max(a, it->t0));
  return sum;
}

int64_t union_length(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& x, const Interval& y) { return x.t0 < y.t0; });
  int64_t total = 0, cur0 = 0, cur1 = 0;
  bool open = false;
  for (const Interval& i : v) {
    if (i.t1 <= i.t0) continue;
    if (open && i.t0 <= cur1) {
      cur1 = std::max(cur1, i.t1);
    } else {
      if (open) total += cur1 - cur0;
      cur0 = i.t0, cur1 = i.t1, open = true;
    }
  }
  if (open) total += cur1 - cur0;
  return total;
}

void index_peer_launches(std::vector<RankData>& all) {
  auto index = std::make_shared<PeerLaunches>();
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  for (const RankData& d : all)
    for (const auto& [key, t] : d.launch) {
      auto [it, fresh] = index->top.try_emplace(key, PeerLaunches::Top{kNone, kNone, -1, -1});
      PeerLaunches::Top& top = it->second;
      if (t > top.t1 || top.r1 < 0) {
        top.t2 = top.t1, top.r2 = top.r1;
        top.t1 = t, top.r1 = d.rank;
      } else if (t > top.t2 || top.r2 < 0) {
        top.t2 = t, top.r2 = d.rank;
      }
    }
  for (RankData& d : all) d.peers = index;
}

int64_t peer_launch(const std::vector<RankData>& all, int self, uint64_t key, int* who) {
  int64_t best = std::numeric_limits<int64_t>::min();
  if (!all.empty() && all.front().peers) {
    const auto& top = all.front().peers->top;
    auto it = top.find(key);
    if (it == top.end()) return best;
    const PeerLaunches::Top& t = it->second;
    const int r = t.r1 == self ? t.r2 : t.r1;
    if (r < 0) return best;
    if (who) *who = r;
    return t.r1 == self ? t.t2 : t.t1;
  }
  for (const RankData& p : all) {
    if (p.rank == self) continue;
    auto it = p.launch.find(key);
    if (it != p.launch.end() && it->second > best) {
      best = it->second;
      if (who) *who = p.rank;
    }
  }
  return best;
}

// Steps every rank analysed.
std::vector<uint32_t> common_steps(const std::vector<RankData>& data) {
  std::vector<uint32_t> common;
  if (data.empty()) return common;
  common = data.front().analysed;
  for (const RankData& d : data) {
    std::vector<uint32_t> keep;
    for (uint32_t s : common)
      if (d.in(s)) keep.push_back(s);
    common.swap(keep);
  }
  return common;
}

int rank_index(const std::vector<RankData>& data, int rank) {
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i].rank == rank) return static_cast<int>(i);
  return -1;
}

}  // namespace ddp::rank_data
