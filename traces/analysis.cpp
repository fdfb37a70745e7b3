#include "traces/analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

#include "traces/stats.h"
#include "traces/text_format.h"

namespace ddp {
namespace {

double ms(double ns) { return ns / 1e6; }

std::string sname(Stage s) { return std::string(stage_name(s)); }

// One span, on the common clock (rank 0's).
struct Span {
  int64_t t0 = 0, t1 = 0;
  uint64_t value = 0;
  uint32_t step = 0;
  uint32_t item = 0;
  uint16_t epoch = 0;
  uint16_t bucket = kNoBucket;
  uint8_t micro = 0;
  Stage stage = Stage::step;
  uint8_t lane = 0;
  int64_t dur() const { return t1 - t0; }
};

struct Interval {
  int64_t t0 = 0, t1 = 0;
};

struct Sample {
  int64_t t = 0;
  uint64_t v = 0;
};

constexpr auto kLoaderStages = stages_with<kStageLoaderThread>();
// Stages of the main (compute) thread that can make a rank late for a collective (see kStageDelaysCollective).
constexpr auto kMainWork = stages_with<kStageDelaysCollective>();

bool is_main_stage(Stage s) { return stage_has(s, kStageMainThread); }

uint64_t sync_key(uint32_t step, uint8_t micro) { return (static_cast<uint64_t>(step) << 8) | micro; }

uint64_t bucket_key(uint32_t step, uint8_t micro, uint16_t bucket) {
  return (static_cast<uint64_t>(step) << 24) | (static_cast<uint64_t>(micro) << 16) | bucket;
}

struct RankData {
  const RankTrace* trace = nullptr;
  int rank = 0;
  std::vector<Span> main;       // main-lane spans except `step`, sorted by t0
  std::vector<Span> loader;     // disk_read, transform, pin
  std::vector<Span> allreduce;  // one per bucket per sync, sorted by t0
  std::vector<Span> other;      // anything else: GPU activity, main stages on other lanes
  std::vector<Span> wait_comm;  // the main lane's wait_comm spans, sorted by t0
  std::map<uint32_t, Interval> steps;
  std::array<std::vector<Sample>, kCounterCount> counters;
  std::set<uint8_t> loader_lanes;
  std::vector<uint32_t> analysed;
  std::vector<uint8_t> analysed_mask;  // indexed by step - analysed.front(); empty when the range is huge
  bool in(uint32_t step) const {
    if (analysed_mask.empty()) return std::binary_search(analysed.begin(), analysed.end(), step);
    return step >= analysed.front() && step - analysed.front() < analysed_mask.size() &&
           analysed_mask[step - analysed.front()];
  }
  std::unordered_map<uint64_t, int64_t> launch;  // bucket_key -> allreduce launch (t0)
  std::map<uint64_t, int64_t> sync_done;          // sync_key -> completion of its last bucket (max t1)
  std::vector<Interval> compute;                  // merged forward/backward intervals of the main lane
  std::unordered_map<uint32_t, std::vector<size_t>> main_by_step;
  std::unordered_map<uint32_t, std::vector<size_t>> ar_by_step;
};

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

RankData prepare(const RankTrace& t) {
  RankData d;
  d.trace = &t;
  d.rank = static_cast<int>(t.rank);
  const int64_t off = t.clock_offset_ns();
  const int main_lane = find_main_lane(t);
  for (const Event& e : t.events) {
    if (!e.is_span()) {
      if (e.stage < kCounterCount) d.counters[e.stage].push_back({e.t0 + off, e.value});
      continue;
    }
    if (e.stage >= kStageCount) continue;
    Span s;
    s.t0 = e.t0 + off;
    s.t1 = std::max(e.t1, e.t0) + off;
    s.value = e.value;
    s.step = e.step;
    s.item = e.item;
    s.epoch = e.epoch;
    s.bucket = e.bucket;
    s.micro = e.micro;
    s.stage = e.stage_id();
    s.lane = e.lane;
    if (s.stage == Stage::step) {
      auto [it, fresh] = d.steps.try_emplace(s.step, Interval{s.t0, s.t1});
      if (!fresh) it->second = {std::min(it->second.t0, s.t0), std::max(it->second.t1, s.t1)};
    } else if (stage_has(s.stage, kStageLoaderThread)) {
      d.loader.push_back(s);
      d.loader_lanes.insert(s.lane);
    } else if (s.stage == Stage::allreduce) {
      d.allreduce.push_back(s);
    } else if (is_main_stage(s.stage) && static_cast<int>(s.lane) == main_lane) {
      d.main.push_back(s);
    } else {
      d.other.push_back(s);
    }
  }
  auto by_t0 = [](const Span& a, const Span& b) { return a.t0 < b.t0; };
  std::sort(d.main.begin(), d.main.end(), by_t0);
  std::sort(d.allreduce.begin(), d.allreduce.end(), by_t0);
  for (auto& c : d.counters)
    std::sort(c.begin(), c.end(), [](const Sample& a, const Sample& b) { return a.t < b.t; });

  // A trace without step spans (older runtime, or cut short): a step is the extent of its main-lane spans.
  if (d.steps.empty()) {
    for (const Span& s : d.main) {
      auto [it, fresh] = d.steps.try_emplace(s.step, Interval{s.t0, s.t1});
      if (!fresh) it->second = {std::min(it->second.t0, s.t0), std::max(it->second.t1, s.t1)};
    }
  }
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
  for (size_t i = 0; i < d.allreduce.size(); ++i) d.ar_by_step[d.allreduce[i].step].push_back(i);
  // Other spans (GPU activity) may not carry a step: they belong to the step whose span holds their start.
  {
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

  for (const auto& kv : d.steps) d.analysed.push_back(kv.first);
  if (d.analysed.size() >= 3) d.analysed.erase(d.analysed.begin());  // warm-up
  if (!d.analysed.empty() && d.analysed.back() - d.analysed.front() < (1u << 26)) {
    d.analysed_mask.assign(static_cast<size_t>(d.analysed.back() - d.analysed.front()) + 1, 0);
    for (uint32_t s : d.analysed) d.analysed_mask[s - d.analysed.front()] = 1;
  }
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

// Latest launch of the same bucket on any other rank, or INT64_MIN when no peer launched it.
int64_t peer_launch(const std::vector<RankData>& all, int self, uint64_t key, int* who = nullptr) {
  int64_t best = std::numeric_limits<int64_t>::min();
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

// Per-stage time of the main lane inside [a, b), plus the untracked remainder ("other").
struct WindowSums {
  std::array<double, kStageCount> stage{};
  double other = 0;
};

WindowSums window_sums(const RankData& d, int64_t a, int64_t b) {
  WindowSums w;
  if (b <= a) return w;
  auto it = std::lower_bound(d.main.begin(), d.main.end(), a, [](const Span& s, int64_t x) { return s.t0 < x; });
  if (it != d.main.begin() && std::prev(it)->t1 > a) --it;
  double tracked = 0;
  for (; it != d.main.end() && it->t0 < b; ++it) {
    double c = static_cast<double>(std::max<int64_t>(0, std::min(b, it->t1) - std::max(a, it->t0)));
    w.stage[static_cast<int>(it->stage)] += c;
    tracked += c;
  }
  w.other = std::max(0.0, static_cast<double>(b - a) - tracked);
  return w;
}

const nlohmann::json& config_of(const RunTrace& run) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (run.manifest.is_object()) {
    auto it = run.manifest.find("config");
    if (it != run.manifest.end() && it->is_object()) return *it;
  }
  return empty;
}

double cfg_num(const nlohmann::json& cfg, const char* key, double dflt) {
  auto it = cfg.find(key);
  return it != cfg.end() && it->is_number() ? it->get<double>() : dflt;
}

// -1 unknown, 0 false, 1 true
int cfg_bool(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || !it->is_boolean()) return -1;
  return it->get<bool>() ? 1 : 0;
}

RankAnalysis rank_stats(const RankData& d, const std::vector<RankData>& all, int world, const nlohmann::json& cfg) {
  RankAnalysis r;
  r.rank = d.rank;
  r.complete = d.trace->complete;
  r.dropped = d.trace->dropped;
  r.steps = d.analysed.size();
  if (r.steps == 0) return r;
  const double n = static_cast<double>(r.steps);
  double step_total = 0;
  for (uint32_t s : d.analysed) step_total += static_cast<double>(d.steps.at(s).t1 - d.steps.at(s).t0);
  r.step_ms = ms(step_total) / n;

  std::array<double, kStageCount> tot{};
  std::array<uint64_t, kStageCount> cnt{}, bytes{};
  auto add = [&](const std::vector<Span>& v) {
    for (const Span& s : v) {
      if (!d.in(s.step)) continue;
      int i = static_cast<int>(s.stage);
      tot[i] += static_cast<double>(s.dur());
      cnt[i]++;
      bytes[i] += s.value;
    }
  };
  add(d.main), add(d.loader), add(d.allreduce), add(d.other);
  for (int i = 0; i < kStageCount; ++i)
    if (cnt[i]) r.stages_ms_per_step[sname(static_cast<Stage>(i))] = ms(tot[i]) / n;
  r.wait_data_ms = ms(tot[static_cast<int>(Stage::wait_data)]) / n;
  r.wait_comm_ms = ms(tot[static_cast<int>(Stage::wait_comm)]) / n;
  r.micro_steps = static_cast<double>(cnt[static_cast<int>(Stage::forward)]) / n;
  const int h2d = static_cast<int>(Stage::h2d);
  if (tot[h2d] > 0) r.h2d_gbps = static_cast<double>(bytes[h2d]) / tot[h2d];

  // Allreduce: overlap with compute, skew against peers, transfer time.
  double ar_total = 0, ar_hidden = 0, skew_total = 0;
  uint64_t ar_count = 0, ar_bytes = 0;
  // Per sync: when this rank sat in a bucket's allreduce before the last peer launched it, and when the transfer ran.
  std::map<std::pair<uint32_t, uint8_t>, std::vector<Interval>> transfer, waiting;
  for (const Span& s : d.allreduce) {
    if (!d.in(s.step)) continue;
    ar_count++;
    ar_bytes += s.value;
    ar_total += static_cast<double>(s.dur());
    ar_hidden += static_cast<double>(overlap_with(d.compute, s.t0, s.t1));
    int64_t p = peer_launch(all, d.rank, bucket_key(s.step, s.micro, s.bucket));
    int64_t skew = p == std::numeric_limits<int64_t>::min() ? 0 : std::clamp<int64_t>(p - s.t0, 0, s.dur());
    waiting[{s.step, s.micro}].push_back({s.t0, s.t0 + skew});
    transfer[{s.step, s.micro}].push_back({s.t0 + skew, s.t1});
  }
  for (auto& kv : waiting) skew_total += static_cast<double>(union_length(kv.second));
  if (ar_count) {
    r.overlap_pct = ar_total > 0 ? 100.0 * ar_hidden / ar_total : 0;
    double busy = 0;
    for (auto& kv : transfer) busy += static_cast<double>(union_length(kv.second));
    AllreduceStats& a = r.allreduce;
    a.count_per_step = static_cast<double>(ar_count) / n;
    a.syncs_per_step = static_cast<double>(transfer.size()) / n;
    a.bytes_per_step = static_cast<double>(ar_bytes) / n;
    a.mean_bucket_bytes = static_cast<double>(ar_bytes) / static_cast<double>(ar_count);
    a.time_ms_per_step = ms(busy) / n;
    a.algbw_gbps = busy > 0 ? static_cast<double>(ar_bytes) / busy : 0;
    a.busbw_gbps = world > 0 ? a.algbw_gbps * 2.0 * (world - 1) / world : 0;
  }
  r.skew_ms = ms(skew_total) / n;

  // Loader: per-batch stage times of the batches these steps consumed, against the main thread's demand.
  LoaderStats& L = r.loader;
  std::vector<uint64_t> batches;
  std::array<double, kStageCount> lt{};
  std::set<uint8_t> lanes;
  for (const Span& s : d.loader) {
    if (!d.in(s.step)) continue;
    batches.push_back((static_cast<uint64_t>(s.epoch) << 32) | s.item);
    lt[static_cast<int>(s.stage)] += static_cast<double>(s.dur());
    lanes.insert(s.lane);
  }
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  L.batches = static_cast<double>(batches.size());
  L.workers = static_cast<int>(cfg_num(cfg, "workers", 0));
  if (L.workers <= 0) L.workers = static_cast<int>(lanes.size());
  if (!batches.empty()) {
    for (Stage st : kLoaderStages) {
      double v = ms(lt[static_cast<int>(st)]) / L.batches;
      L.ms_per_batch[sname(st)] = v;
      L.batch_ms += v;
    }
    L.supply_ms_per_batch = L.workers > 0 ? L.batch_ms / L.workers : L.batch_ms;
  }
  if (r.micro_steps > 0) L.demand_ms_per_batch = std::max(0.0, r.step_ms - r.wait_data_ms) / r.micro_steps;
  if (L.demand_ms_per_batch > 0) L.utilization = L.supply_ms_per_batch / L.demand_ms_per_batch;
  const auto& q = d.counters[static_cast<int>(Counter::loader_queue_depth)];
  if (!q.empty()) {
    int64_t a = d.steps.at(d.analysed.front()).t0, b = d.steps.at(d.analysed.back()).t1;
    uint64_t in = 0, zero = 0;
    for (const Sample& s : q)
      if (s.t >= a && s.t <= b) in++, zero += s.v == 0;
    if (in) L.queue_empty_fraction = static_cast<double>(zero) / static_cast<double>(in);
  }
  return r;
}

// Which loader stage is to blame for a rank's data waits: the one most above the other ranks' (when clearly above),
// else the largest per batch.
std::string loader_cause(const std::vector<RankAnalysis>& ra, size_t r) {
  const auto& mine = ra[r].loader.ms_per_batch;
  if (mine.empty()) return sname(Stage::wait_data);
  std::string best_excess, best_abs;
  double ex = 0, ab = -1;
  for (Stage st : kLoaderStages) {
    const std::string nm = sname(st);
    double m = mine.count(nm) ? mine.at(nm) : 0;
    double peer = 0;
    int np = 0;
    for (size_t o = 0; o < ra.size(); ++o) {
      if (o == r || ra[o].loader.ms_per_batch.empty()) continue;
      peer += ra[o].loader.ms_per_batch.count(nm) ? ra[o].loader.ms_per_batch.at(nm) : 0;
      np++;
    }
    if (np) {
      double e = m - peer / np;
      if (e > ex && e > 0.2 * m) ex = e, best_excess = nm;
    }
    if (m > ab) ab = m, best_abs = nm;
  }
  return best_excess.empty() ? best_abs : best_excess;
}

struct Contribution {
  int victim = 0;
  Stage shown = Stage::wait_data;
  uint32_t step = 0;
  double ns = 0;
  int64_t at = 0;
};

using CauseKey = std::pair<int, std::string>;

double stage_ms(const RankAnalysis& r, const std::string& stage) {
  auto it = r.stages_ms_per_step.find(stage);
  return it == r.stages_ms_per_step.end() ? 0 : it->second;
}

double untracked_ms(const RankAnalysis& r) {
  double tracked = 0;
  for (Stage s : kMainWork) tracked += stage_ms(r, sname(s));
  tracked += stage_ms(r, sname(Stage::wait_comm));
  return std::max(0.0, r.step_ms - tracked);
}

double peer_mean(const std::vector<RankAnalysis>& ra, int self, const std::function<double(const RankAnalysis&)>& f) {
  double sum = 0;
  int n = 0;
  for (const RankAnalysis& r : ra)
    if (r.rank != self && r.steps) sum += f(r), n++;
  return n ? sum / n : 0;
}

const RankAnalysis* find_rank(const std::vector<RankAnalysis>& ra, int rank) {
  for (const RankAnalysis& r : ra)
    if (r.rank == rank) return &r;
  return nullptr;
}

void explain(StallCause& c, const std::vector<RankAnalysis>& ra) {
  nlohmann::json ev = nlohmann::json::object();
  ev["lost_ms_per_step"] = c.lost_ms_per_step;
  const RankAnalysis* r = find_rank(ra, c.rank);
  std::optional<Stage> st = stage_from_name(c.stage);
  if (c.rank < 0 || !r) {
    // The collective's own cost: exposed after backward on every rank.
    double exposed = 0, t = 0, bytes = 0, alg = 0, bus = 0, ov = 0, cnt = 0;
    int n = 0;
    for (const RankAnalysis& x : ra) {
      if (!x.steps) continue;
      exposed += x.wait_comm_ms, t += x.allreduce.time_ms_per_step, bytes += x.allreduce.bytes_per_step;
      alg += x.allreduce.algbw_gbps, bus += x.allreduce.busbw_gbps, ov += x.overlap_pct, cnt += x.allreduce.count_per_step;
      n++;
    }
    if (n) exposed /= n, t /= n, bytes /= n, alg /= n, bus /= n, ov /= n, cnt /= n;
    ev["wait_comm_ms_per_step"] = exposed;
    ev["allreduce_ms_per_step"] = t;
    ev["bytes_per_step"] = bytes;
    ev["buckets_per_step"] = cnt;
    ev["algbw_gbps"] = alg;
    ev["busbw_gbps"] = bus;
    ev["overlap_pct"] = ov;
    c.explanation = fmt(
        "allreduce is not hidden behind backward: %.2f ms/step exposed after backward; %.0f buckets, %.2f MB/step "
        "at busbw %.2f GB/s, %.0f%% overlapped",
        c.lost_ms_per_step, cnt, bytes / 1e6, bus, ov);
  } else if (st && stage_has(*st, kStageLoaderThread)) {
    const LoaderStats& L = r->loader;
    ev["wait_data_ms_per_step"] = r->wait_data_ms;
    ev["loader_ms_per_batch"] = L.ms_per_batch;
    std::map<std::string, double> peer;
    for (Stage s : kLoaderStages) {
      std::string nm = sname(s);
      peer[nm] = peer_mean(ra, c.rank, [&](const RankAnalysis& x) {
        return x.loader.ms_per_batch.count(nm) ? x.loader.ms_per_batch.at(nm) : 0.0;
      });
    }
    if (ra.size() > 1) ev["peer_loader_ms_per_batch"] = peer;
    ev["workers"] = L.workers;
    ev["loader_batch_ms"] = L.batch_ms;
    ev["supply_ms_per_batch"] = L.supply_ms_per_batch;
    ev["demand_ms_per_batch"] = L.demand_ms_per_batch;
    ev["loader_utilization"] = L.utilization;
    if (L.queue_empty_fraction >= 0) ev["queue_empty_fraction"] = L.queue_empty_fraction;
    double mine = L.ms_per_batch.count(c.stage) ? L.ms_per_batch.at(c.stage) : 0;
    c.explanation = fmt("rank %d's loader is slow in %s (%.2f ms/batch%s); %d worker(s) supply a batch every %.2f ms, "
                        "compute needs one every %.2f ms",
                        c.rank, c.stage.c_str(), mine,
                        ra.size() > 1 ? fmt(" vs %.2f on other ranks", peer[c.stage]).c_str() : "", L.workers,
                        L.supply_ms_per_batch, L.demand_ms_per_batch);
  } else {
    double mine = c.stage == "other" ? untracked_ms(*r) : stage_ms(*r, c.stage);
    double peer = peer_mean(ra, c.rank, [&](const RankAnalysis& x) {
      return c.stage == "other" ? untracked_ms(x) : stage_ms(x, c.stage);
    });
    ev["stage_ms_per_step"] = mine;
    if (ra.size() > 1) {
      ev["peer_stage_ms_per_step"] = peer;
      ev["excess_ms_per_step"] = mine - peer;
    }
    if (c.stage == "wait_data")
      c.explanation = fmt("rank %d waits %.2f ms/step for input and no loader spans were recorded to say why", c.rank,
                          mine);
    else
      c.explanation = fmt("rank %d spends %.2f ms/step in %s%s", c.rank, mine,
                          c.stage == "other" ? "untracked main-thread time" : c.stage.c_str(),
                          ra.size() > 1 ? fmt(" vs %.2f on other ranks, which wait for it in allreduce", peer).c_str()
                                        : "");
  }
  c.evidence = std::move(ev);
}

void add_flag(Analysis& a, const char* id, int rank, std::string msg, nlohmann::json ev) {
  a.flags.push_back({id, rank, std::move(msg), std::move(ev)});
}

void memory_flag(Analysis& a, const RankData& d, Counter c) {
  const auto& s = d.counters[static_cast<int>(c)];
  if (s.size() < 8) return;
  int64_t t_a = s.front().t, t_b = s.back().t;
  int64_t cut = t_a + (t_b - t_a) / 10;  // the first tenth is warm-up (allocator, first batches)
  std::vector<double> v;
  for (const Sample& x : s)
    if (x.t >= cut) v.push_back(static_cast<double>(x.v));
  if (v.size() < 6) return;
  size_t k = v.size() / 3;
  double m1 = median({v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k)});
  double m2 = median({v.begin() + static_cast<std::ptrdiff_t>(k), v.begin() + static_cast<std::ptrdiff_t>(2 * k)});
  double m3 = median({v.begin() + static_cast<std::ptrdiff_t>(2 * k), v.end()});
  double growth = m3 - m1;
  if (!(m1 < m2 && m2 < m3) || growth <= 50.0 * (1 << 20) || growth <= 0.10 * m1) return;
  std::string what = c == Counter::host_rss_bytes ? "host RSS" : std::string(counter_name(c));
  add_flag(a, "memory_growth", d.rank,
           fmt("rank %d: %s grows steadily from %.1f to %.1f MiB (+%.0f%%) over the run", d.rank, what.c_str(),
               m1 / (1 << 20), m3 / (1 << 20), 100.0 * growth / std::max(1.0, m1)),
           {{"counter", std::string(counter_name(c))},
            {"first_third_median_bytes", m1},
            {"middle_third_median_bytes", m2},
            {"last_third_median_bytes", m3},
            {"growth_bytes", growth}});
}

}  // namespace

Analysis analyze(const RunTrace& run) {
  Analysis a;
  a.problems = run.problems;
  const nlohmann::json& cfg = config_of(run);
  a.world = static_cast<int>(run.ranks.size());
  if (run.manifest.is_object() && run.manifest.contains("world_size") && run.manifest["world_size"].is_number())
    a.world = std::max(a.world, run.manifest["world_size"].get<int>());
  if (a.world == 0 && !run.ranks.empty()) a.world = static_cast<int>(run.ranks.front().world);

  std::vector<RankData> data;
  data.reserve(run.ranks.size());
  for (const RankTrace& t : run.ranks) data.push_back(prepare(t));
  for (const RankData& d : data) {
    a.ranks.push_back(rank_stats(d, data, std::max(a.world, 1), cfg));
    if (d.steps.empty()) a.problems.push_back("rank " + std::to_string(d.rank) + ": no steps recorded");
  }

  // Steps every rank analysed.
  std::vector<uint32_t> common;
  if (!data.empty()) {
    common = data.front().analysed;
    for (const RankData& d : data) {
      std::vector<uint32_t> keep;
      for (uint32_t s : common)
        if (d.in(s)) keep.push_back(s);
      common.swap(keep);
    }
    a.warmup_steps = data.front().steps.size() - data.front().analysed.size();
  }
  a.steps = common.size();
  {
    double sum = 0;
    int n = 0;
    for (const RankAnalysis& r : a.ranks)
      if (r.steps) sum += r.step_ms, n++;
    a.step_ms = n ? sum / n : 0;
  }
  std::vector<std::string> lcause;
  for (size_t i = 0; i < a.ranks.size(); ++i) lcause.push_back(loader_cause(a.ranks, i));
  auto rank_index = [&](int rank) -> int {
    for (size_t i = 0; i < data.size(); ++i)
      if (data[i].rank == rank) return static_cast<int>(i);
    return -1;
  };

  // ---- attribution ----
  std::map<CauseKey, std::vector<Contribution>> contrib;
  std::set<uint32_t> common_set(common.begin(), common.end());
  for (size_t ri = 0; ri < data.size(); ++ri) {
    const RankData& d = data[ri];
    for (uint32_t s : common) {
      auto ms_it = d.main_by_step.find(s);
      if (ms_it == d.main_by_step.end()) continue;
      for (size_t idx : ms_it->second) {
        const Span& w = d.main[idx];
        if (w.dur() <= 0) continue;
        if (w.stage == Stage::wait_data) {
          contrib[{d.rank, lcause[ri]}].push_back({d.rank, Stage::wait_data, s, static_cast<double>(w.dur()), w.t0});
          continue;
        }
        if (w.stage != Stage::wait_comm) continue;
        // The buckets this wait covers, and the last peer launch among them.
        int64_t last = std::numeric_limits<int64_t>::min();
        int late = -1;
        uint8_t sync_micro = w.micro;
        auto ar = d.ar_by_step.find(s);
        if (ar != d.ar_by_step.end()) {
          bool any_micro = false;
          for (size_t k : ar->second) any_micro |= d.allreduce[k].micro == w.micro;
          if (!any_micro) {
            sync_micro = 0;
            for (size_t k : ar->second) sync_micro = std::max(sync_micro, d.allreduce[k].micro);
          }
          for (size_t k : ar->second) {
            const Span& b = d.allreduce[k];
            if (b.micro != sync_micro) continue;
            int who = -1;
            int64_t p = peer_launch(data, d.rank, bucket_key(b.step, b.micro, b.bucket), &who);
            if (p > last) last = p, late = who;
          }
        }
        int64_t skew = late < 0 ? 0 : std::clamp<int64_t>(last - w.t0, 0, w.dur());
        double exposed = static_cast<double>(w.dur() - skew);
        if (exposed > 0) contrib[{-1, sname(Stage::allreduce)}].push_back({d.rank, Stage::wait_comm, s, exposed, w.t0});
        if (skew <= 0) continue;
        // Why was the peer late? Compare what each main thread did since the previous collective completed (a moment
        // common to both ranks; a rank still busy then, e.g. in a slow backward tail, shows that work in the window).
        const int pi = rank_index(late);
        const RankData& p = data[static_cast<size_t>(pi)];
        auto prev_end = [](const RankData& x, int64_t before, uint32_t step) {
          auto it = std::upper_bound(x.wait_comm.begin(), x.wait_comm.end(), before,
                                     [](int64_t t, const Span& sp) { return t < sp.t1; });
          if (it != x.wait_comm.begin()) return std::prev(it)->t1;
          auto st = x.steps.find(step);
          return st != x.steps.end() ? st->second.t0 : before;
        };
        int64_t me0 = prev_end(d, w.t0, s), pe0 = prev_end(p, last, s);
        const uint64_t key = sync_key(s, sync_micro);
        auto prev = d.sync_done.lower_bound(key);
        if (prev != d.sync_done.begin()) {
          --prev;
          int64_t done = prev->second;
          auto pp = p.sync_done.find(prev->first);
          if (pp != p.sync_done.end()) done = std::max(done, pp->second);
          if (done < w.t0 && done < last) me0 = pe0 = done;
        }
        WindowSums mine = window_sums(d, me0, w.t0), theirs = window_sums(p, pe0, last);
        std::vector<std::pair<std::string, double>> deltas;
        double positive = 0;
        for (Stage st : kMainWork) {
          double dl = theirs.stage[static_cast<int>(st)] - mine.stage[static_cast<int>(st)];
          if (dl <= 0) continue;
          deltas.push_back({st == Stage::wait_data ? lcause[static_cast<size_t>(pi)] : sname(st), dl});
          positive += dl;
        }
        if (theirs.other > mine.other) {
          deltas.push_back({"other", theirs.other - mine.other});
          positive += theirs.other - mine.other;
        }
        if (positive <= 0) deltas = {{"other", 1.0}}, positive = 1.0;
        for (const auto& [stage, dl] : deltas)
          contrib[{late, stage}].push_back(
              {d.rank, Stage::wait_comm, s, static_cast<double>(skew) * dl / positive, w.t0});
      }
    }
  }

  const int64_t origin = run.origin_ns();
  const double nsteps = static_cast<double>(std::max<uint64_t>(a.steps, 1));
  for (auto& [key, list] : contrib) {
    StallCause c;
    c.rank = key.first;
    c.stage = key.second;
    std::map<uint32_t, std::map<int, double>> per_step;
    std::map<std::pair<int, Stage>, double> victims;
    for (const Contribution& x : list) {
      per_step[x.step][x.victim] += x.ns;
      victims[{x.victim, x.shown}] += x.ns;
    }
    double lost = 0, worst = -1;
    uint32_t worst_step = 0;
    for (const auto& [step, by_victim] : per_step) {
      double m = 0;
      for (const auto& kv : by_victim) m = std::max(m, kv.second);
      lost += m;
      if (m > worst) worst = m, worst_step = step;
    }
    const Contribution* at = nullptr;
    for (const Contribution& x : list)
      if (x.step == worst_step && (!at || x.ns > at->ns)) at = &x;
    c.lost_ms = ms(lost);
    c.lost_ms_per_step = c.lost_ms / nsteps;
    c.share = a.step_ms > 0 ? c.lost_ms_per_step / a.step_ms : 0;
    if (c.share < kMinCauseShare) continue;
    for (const auto& [vk, ns] : victims) c.victims.push_back({vk.first, sname(vk.second), ms(ns)});
    if (at) c.at_ns = at->at - origin, c.at_rank = at->victim, c.at_step = at->step;
    explain(c, a.ranks);
    a.causes.push_back(std::move(c));
  }
  std::stable_sort(a.causes.begin(), a.causes.end(),
                   [](const StallCause& x, const StallCause& y) { return x.lost_ms > y.lost_ms; });

  // ---- flags ----
  const int pinned = cfg_bool(cfg, "pinned");
  const double accum_cfg = cfg_num(cfg, "accum_steps", 0);
  const int sync_every = cfg_bool(cfg, "sync_every_step");
  for (size_t i = 0; i < data.size(); ++i) {
    const RankData& d = data[i];
    const RankAnalysis& r = a.ranks[i];
    if (!r.complete)
      add_flag(a, "trace_incomplete", r.rank,
               fmt("rank %d: the trace was not closed cleanly (the rank crashed or was killed)", r.rank), {});
    if (r.dropped)
      add_flag(a, "events_dropped", r.rank,
               fmt("rank %d: %llu events were dropped (recorder buffers full); numbers undercount", r.rank,
                   static_cast<unsigned long long>(r.dropped)),
               {{"dropped", r.dropped}});
    if (!r.steps) continue;
    const double h2d_ms = stage_ms(r, "h2d");
    const double h2d_share = r.step_ms > 0 ? h2d_ms / r.step_ms : 0;
    if (h2d_ms > 0 && (pinned == 0 || (pinned < 0 && r.h2d_gbps < 3.0 && h2d_share >= 0.02)))
      add_flag(a, "pageable_h2d", r.rank,
               fmt("rank %d: host-to-device copies %s: %.2f ms/step (%.1f%% of the step) at %.2f GB/s", r.rank,
                   pinned == 0 ? "use pageable memory (pinned=false)" : "are slow, as if from pageable memory",
                   h2d_ms, 100 * h2d_share, r.h2d_gbps),
               {{"pinned", pinned < 0 ? nlohmann::json(nullptr) : nlohmann::json(pinned == 1)},
                {"h2d_ms_per_step", h2d_ms},
                {"h2d_gbps", r.h2d_gbps},
                {"share", h2d_share}});
    const double accum = accum_cfg >= 1 ? accum_cfg : std::round(r.micro_steps);
    if (accum > 1) {
      uint64_t early = 0;
      for (const Span& s : d.allreduce)
        if (d.in(s.step) && s.micro + 1 < accum) early++;
      if (early > 0 || sync_every == 1)
        add_flag(a, "sync_every_micro_step", r.rank,
                 fmt("rank %d: gradient accumulation over %.0f micro-steps allreduces %.1f times per step instead of "
                     "once (no no_sync on the first micro-steps)",
                     r.rank, accum, r.allreduce.syncs_per_step),
                 {{"accum_steps", accum},
                  {"syncs_per_step", r.allreduce.syncs_per_step},
                  {"early_allreduces_per_step", static_cast<double>(early) / static_cast<double>(r.steps)}});
    }
    if (r.allreduce.syncs_per_step > 0) {
      double per_sync = r.allreduce.count_per_step / r.allreduce.syncs_per_step;
      double mb = r.allreduce.mean_bucket_bytes / (1 << 20);
      if (per_sync > 8 || (per_sync >= 3 && mb < 1.0)) {
        nlohmann::json ev = {{"buckets_per_sync", per_sync}, {"mean_bucket_bytes", r.allreduce.mean_bucket_bytes}};
        if (cfg.contains("bucket_mb")) ev["bucket_mb"] = cfg["bucket_mb"];
        add_flag(a, "tiny_buckets", r.rank,
                 fmt("rank %d: %.1f allreduces per sync averaging %.3f MiB; per-call latency dominates (raise "
                     "--bucket-mb)",
                     r.rank, per_sync, mb),
                 ev);
      }
    }
    const LoaderStats& L = r.loader;
    const double wd_share = r.step_ms > 0 ? r.wait_data_ms / r.step_ms : 0;
    if (wd_share >= 0.05 || (wd_share >= 0.01 && (L.utilization > 1.0 || L.queue_empty_fraction >= 0.5)))
      add_flag(a, "loader_cannot_keep_up", r.rank,
               fmt("rank %d: compute waits for input %.2f ms/step (%.1f%% of the step); %s", r.rank, r.wait_data_ms,
                   100 * wd_share,
                   L.batches > 0 ? fmt("the loader delivers a batch every %.2f ms with %d worker(s), compute needs one "
                                       "every %.2f ms",
                                       L.supply_ms_per_batch, L.workers, L.demand_ms_per_batch)
                                       .c_str()
                                 : "no loader spans were recorded"),
               {{"wait_data_ms_per_step", r.wait_data_ms},
                {"share", wd_share},
                {"loader_utilization", L.utilization},
                {"queue_empty_fraction", L.queue_empty_fraction >= 0 ? nlohmann::json(L.queue_empty_fraction)
                                                                     : nlohmann::json(nullptr)}});
    memory_flag(a, d, Counter::host_rss_bytes);
    memory_flag(a, d, Counter::cuda_allocated_bytes);
  }

  // ---- verdict ----
  if (a.steps == 0) {
    a.verdict = "no complete steps to analyse";
  } else if (!a.causes.empty() && a.causes.front().share >= kDominantShare) {
    const StallCause& c = a.causes.front();
    if (c.rank < 0)
      a.verdict = fmt("communication bound: exposed allreduce costs %.2f ms/step (%.0f%% of step time)",
                      c.lost_ms_per_step, 100 * c.share);
    else
      a.verdict = fmt("dominant stall: rank %d %s costs %.2f ms/step (%.0f%% of step time)", c.rank, c.stage.c_str(),
                      c.lost_ms_per_step, 100 * c.share);
  } else {
    double compute = 0;
    int n = 0;
    for (const RankAnalysis& r : a.ranks) {
      if (!r.steps || r.step_ms <= 0) continue;
      compute += (stage_ms(r, "h2d") + stage_ms(r, "forward") + stage_ms(r, "backward") + stage_ms(r, "optimizer")) /
                 r.step_ms;
      n++;
    }
    compute = n ? compute / n : 0;
    a.verdict = fmt("no dominant stall: compute bound (h2d+forward+backward+optimizer %.0f%% of step time)",
                    100 * compute);
    if (!a.causes.empty()) {
      const StallCause& c = a.causes.front();
      a.verdict += fmt("; largest stall %s %s %.1f%%", c.rank < 0 ? "all ranks" : fmt("rank %d", c.rank).c_str(),
                       c.stage.c_str(), 100 * c.share);
    }
  }
  return a;
}

nlohmann::json analysis_json(const Analysis& a) {
  nlohmann::json causes = nlohmann::json::array();
  for (const StallCause& c : a.causes) {
    nlohmann::json victims = nlohmann::json::array();
    for (const StallVictim& v : c.victims) victims.push_back({{"rank", v.rank}, {"stage", v.stage}, {"ms", v.ms}});
    causes.push_back({{"rank", c.rank},
                      {"stage", c.stage},
                      {"lost_ms", c.lost_ms},
                      {"lost_ms_per_step", c.lost_ms_per_step},
                      {"share", c.share},
                      {"victims", victims},
                      {"evidence", c.evidence},
                      {"explanation", c.explanation},
                      {"at_ns", c.at_ns},
                      {"at_rank", c.at_rank},
                      {"at_step", c.at_step}});
  }
  nlohmann::json flags = nlohmann::json::array();
  for (const StallFlag& f : a.flags)
    flags.push_back({{"id", f.id},
                     {"rank", f.rank},
                     {"message", f.message},
                     {"evidence", f.evidence.is_null() ? nlohmann::json::object() : f.evidence}});
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankAnalysis& r : a.ranks) {
    const AllreduceStats& ar = r.allreduce;
    const LoaderStats& L = r.loader;
    ranks.push_back({{"rank", r.rank},
                     {"steps", r.steps},
                     {"step_ms", r.step_ms},
                     {"stages_ms_per_step", r.stages_ms_per_step},
                     {"wait_data_ms", r.wait_data_ms},
                     {"wait_comm_ms", r.wait_comm_ms},
                     {"micro_steps", r.micro_steps},
                     {"overlap_pct", r.overlap_pct},
                     {"allreduce",
                      {{"count_per_step", ar.count_per_step},
                       {"syncs_per_step", ar.syncs_per_step},
                       {"bytes_per_step", ar.bytes_per_step},
                       {"mean_bucket_bytes", ar.mean_bucket_bytes},
                       {"time_ms_per_step", ar.time_ms_per_step},
                       {"algbw_gbps", ar.algbw_gbps},
                       {"busbw_gbps", ar.busbw_gbps}}},
                     {"skew_ms", r.skew_ms},
                     {"h2d_gbps", r.h2d_gbps},
                     {"loader",
                      {{"workers", L.workers},
                       {"batches", L.batches},
                       {"ms_per_batch", L.ms_per_batch},
                       {"batch_ms", L.batch_ms},
                       {"supply_ms_per_batch", L.supply_ms_per_batch},
                       {"demand_ms_per_batch", L.demand_ms_per_batch},
                       {"utilization", L.utilization},
                       {"queue_empty_fraction",
                        L.queue_empty_fraction >= 0 ? nlohmann::json(L.queue_empty_fraction) : nlohmann::json(nullptr)}}},
                     {"complete", r.complete},
                     {"dropped_events", r.dropped}});
  }
  return {{"schema", "ddp_profile.analysis/1"},
          {"world_size", a.world},
          {"steps", a.steps},
          {"warmup_steps", a.warmup_steps},
          {"step_ms", a.step_ms},
          {"verdict", a.verdict},
          {"causes", causes},
          {"flags", flags},
          {"ranks", ranks},
          {"problems", a.problems}};
}

std::string analysis_text(const Analysis& a) {
  std::string out = "verdict: " + a.verdict + "\n";
  out += fmt("%d rank(s), %llu step(s) analysed (%llu warm-up skipped), mean step %.3f ms\n", a.world,
             static_cast<unsigned long long>(a.steps), static_cast<unsigned long long>(a.warmup_steps), a.step_ms);
  out += "\ncauses (ranked by time lost):\n";
  if (a.causes.empty()) out += "  none above " + fmt("%.0f%%", 100 * kMinCauseShare) + " of step time\n";
  int i = 0;
  for (const StallCause& c : a.causes) {
    std::string who = c.rank < 0 ? std::string("all ranks") : fmt("rank %d", c.rank);
    out += fmt("  %d. %s %s: %.2f ms lost (%.2f ms/step, %.1f%% of step time); worst at step %u, rank %d, +%.6f s\n",
               ++i, who.c_str(), c.stage.c_str(), c.lost_ms, c.lost_ms_per_step, 100 * c.share, c.at_step, c.at_rank,
               static_cast<double>(c.at_ns) / 1e9);
    out += "     " + c.explanation + "\n";
    std::string vs;
    for (const StallVictim& v : c.victims)
      vs += fmt("%srank %d %s %.2f ms", vs.empty() ? "" : ", ", v.rank, v.stage.c_str(), v.ms);
    out += "     victims: " + vs + "\n";
  }
  out += "\nflags:\n";
  if (a.flags.empty()) out += "  none\n";
  for (const StallFlag& f : a.flags) out += "  [" + f.id + "] " + f.message + "\n";
  out += "\nranks:\n";
  for (const RankAnalysis& r : a.ranks) {
    out += fmt("  rank %d: %llu steps, step %.3f ms, wait_data %.3f ms, wait_comm %.3f ms, skew %.3f ms, overlap %.0f%%\n",
               r.rank, static_cast<unsigned long long>(r.steps), r.step_ms, r.wait_data_ms, r.wait_comm_ms, r.skew_ms,
               r.overlap_pct);
    if (r.allreduce.count_per_step > 0)
      out += fmt("    allreduce: %.1f buckets/step, %.3f MB/step, %.3f ms/step, algbw %.3f GB/s, busbw %.3f GB/s\n",
                 r.allreduce.count_per_step, r.allreduce.bytes_per_step / 1e6, r.allreduce.time_ms_per_step,
                 r.allreduce.algbw_gbps, r.allreduce.busbw_gbps);
    if (r.loader.batches > 0)
      out += fmt("    loader: %d worker(s), %.3f ms/batch (supply every %.3f ms, demand every %.3f ms, utilization "
                 "%.2f)\n",
                 r.loader.workers, r.loader.batch_ms, r.loader.supply_ms_per_batch, r.loader.demand_ms_per_batch,
                 r.loader.utilization);
    std::string st;
    for (const auto& [name, v] : r.stages_ms_per_step) st += fmt(" %s %.3f", name.c_str(), v);
    out += "    ms/step:" + st + "\n";
  }
  if (!a.problems.empty()) {
    out += "\nproblems:\n";
    for (const std::string& p : a.problems) out += "  " + p + "\n";
  }
  return out;
}

}  // namespace ddp
