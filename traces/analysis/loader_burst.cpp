#include "traces/analysis/loader_burst.h"

#include <algorithm>
#include <cmath>

#include "traces/base/stats.h"
#include "traces/base/text_format.h"
#include "traces/rank_data/loader_fetch.h"

namespace ddp::analysis_detail {
namespace {

using rank_data::Fetch;
using rank_data::ms;
using rank_data::Span;

// One analysed batch: its fetch, and the wait of the step that took it.
struct Taken {
  const Fetch* fetch = nullptr;
  int64_t take = 0;     // the end of the wait that took it
  double wait_ms = 0;   // that wait's length
  double fetch_ms = 0;  // its fetch, start to end on its lane
};

// The analysed batches in the order the training thread took them, with the rank's whole wait for data (waits for
// batches the loader made or not).
std::vector<Taken> taken_batches(const rank_data::RankData& d, const std::unordered_map<uint64_t, Fetch>& fetched,
                                 double& all_waits_ms) {
  std::vector<Taken> out;
  all_waits_ms = 0;
  for (const Span& w : d.main) {
    if (w.stage != Stage::wait_data || !d.in(w.step)) continue;
    all_waits_ms += ms(static_cast<double>(w.dur()));
    auto f = fetched.find(rank_data::sync_key(w.step, w.micro));
    if (f == fetched.end()) continue;
    out.push_back(
        {&f->second, w.t1, ms(static_cast<double>(w.dur())), ms(static_cast<double>(f->second.end - f->second.start))});
  }
  return out;
}

// The loader stage the slow batches spend their extra in: the most above its median over every batch.
Stage burst_stage(const std::vector<Taken>& all, const std::vector<const Taken*>& slow) {
  Stage best = Stage::disk_read;
  double most = -1;
  for (Stage st : stages_with<kStageLoaderThread>()) {
    auto of = [st](const Taken& t) {
      auto it = t.fetch->stages.find(st);
      return it == t.fetch->stages.end() ? 0.0 : ms(static_cast<double>(it->second));
    };
    std::vector<double> every;
    for (const Taken& t : all) every.push_back(of(t));
    double extra = 0;
    for (const Taken* t : slow) extra += of(*t);
    extra = extra / static_cast<double>(slow.size()) - median(every);
    if (extra > most) most = extra, best = st;
  }
  return best;
}

// Of a slow batch's extra time, its spans' wait for a core above the typical batch's; -1 when a span has no split.
double slow_cpu_wait_ms(const std::vector<Taken>& all, const std::vector<const Taken*>& slow) {
  std::vector<double> every;
  for (const Taken& t : all) {
    if (t.fetch->wait < 0) return -1;
    every.push_back(ms(static_cast<double>(t.fetch->wait)));
  }
  double sum = 0;
  for (const Taken* t : slow) sum += ms(static_cast<double>(t->fetch->wait));
  return std::max(0.0, sum / static_cast<double>(slow.size()) - median(every));
}

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

LoaderBurst find_burst(const rank_data::RankData& d, const LoaderStats& L) {
  LoaderBurst b;
  // No workers: no queue; the training thread's own fetch is its step's work. A loader short of rate on average
  // (utilization above 1) makes its rank wait for every batch: its fix is rate, not depth (the other rules').
  if (L.workers <= 0 || L.demand_ms_per_batch <= 0 || L.utilization > 1) return b;
  const std::unordered_map<uint64_t, Fetch> fetched = rank_data::fetched_batches(d);
  double all_waits_ms = 0;
  const std::vector<Taken> taken = taken_batches(d, fetched, all_waits_ms);
  if (taken.empty() || all_waits_ms <= 0) return b;
  std::vector<std::pair<int64_t, int64_t>> start_take;
  std::vector<double> fetch_ms;
  for (const Taken& t : taken) start_take.push_back({t.fetch->start, t.take}), fetch_ms.push_back(t.fetch_ms);
  b.batches = static_cast<int>(taken.size());
  b.depth = static_cast<int>(std::max<int64_t>(1, rank_data::queue_depth_seen(start_take)));
  b.queue_lead_ms = b.depth * L.demand_ms_per_batch;
  b.typical_fetch_ms = median(fetch_ms);
  std::vector<const Taken*> slow;
  std::vector<double> slow_ms;
  double slow_waits_ms = 0;
  for (const Taken& t : taken)
    if (t.fetch_ms > b.queue_lead_ms) slow.push_back(&t), slow_ms.push_back(t.fetch_ms), slow_waits_ms += t.wait_ms;
  b.slow_batches = static_cast<int>(slow.size());
  if (slow.empty()) return b;
  b.slow_fetch_ms = median(slow_ms);
  b.wait_share = slow_waits_ms / all_waits_ms;
  b.stage = burst_stage(taken, slow);
  b.slow_cpu_wait_ms = slow_cpu_wait_ms(taken, slow);
  // The queue that hides the slowest fetch: ceil(slowest / demand) batches in flight (sized on the median, half the
  // slow batches would still make the rank wait), as prefetch per worker or as workers at the run's prefetch (its
  // depth over its workers); at least one more than now.
  const int needed =
      static_cast<int>(std::ceil(*std::max_element(slow_ms.begin(), slow_ms.end()) / L.demand_ms_per_batch));
  const int prefetch_now = ceil_div(b.depth, L.workers);
  b.prefetch_to_hide = std::max(prefetch_now + 1, ceil_div(needed, L.workers));
  b.workers_to_hide = std::max(L.workers + 1, ceil_div(needed, prefetch_now));
  const double extra_ms = b.slow_fetch_ms - b.typical_fetch_ms;
  const bool the_cores = b.slow_cpu_wait_ms >= 0 && b.slow_cpu_wait_ms >= kBurstCoresShare * extra_ms;
  b.found = b.slow_batches >= kBurstMinSlowBatches && b.wait_share >= kBurstWaitShare && !the_cores;
  return b;
}

std::string burst_text(const LoaderBurst& b, int rank) {
  const double every = b.slow_batches > 0 ? static_cast<double>(b.batches) / b.slow_batches : 0;
  return fmt(
      "one batch in %.0f takes %.1f ms in rank %d's fetch, %.1f ms typical, the extra in %s: the queue of %d "
      "batch(es) in flight hides about %.1f ms of a fetch, so those batches hold %.0f%% of its waits for data, though "
      "its loader keeps up on average; a "
      "queue deep enough would hide it: prefetch_factor=%d (what-if prefetch=%d) or num_workers=%d (workers=%d)",
      every, b.slow_fetch_ms, rank, b.typical_fetch_ms, std::string(stage_name(b.stage)).c_str(), b.depth,
      b.queue_lead_ms, 100 * b.wait_share, b.prefetch_to_hide, b.prefetch_to_hide, b.workers_to_hide,
      b.workers_to_hide);
}

}  // namespace ddp::analysis_detail
