#include "traces/analysis/analysis_measures.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

#include "traces/analysis/loader_burst.h"
#include "traces/base/text_format.h"

namespace ddp::analysis_detail {
namespace {

// Span time, count and bytes per stage over the analysed steps.
struct StageTotals {
  std::array<double, kStageCount> ns{};
  std::array<uint64_t, kStageCount> count{}, bytes{};
};

StageTotals stage_totals(const RankData& d) {
  StageTotals t;
  auto add = [&](const std::vector<Span>& v) {
    for (const Span& s : v) {
      if (!d.in(s.step)) continue;
      int i = static_cast<int>(s.stage);
      t.ns[i] += static_cast<double>(s.dur());
      t.count[i]++;
      t.bytes[i] += s.value;
    }
  };
  add(d.main), add(d.loader), add(d.allreduce), add(d.other);
  return t;
}

void add_stage_measures(RankAnalysis& r, const StageTotals& t, double n) {
  for (int i = 0; i < kStageCount; ++i)
    if (t.count[i]) r.stages_ms_per_step[sname(static_cast<Stage>(i))] = ms(t.ns[i]) / n;
  r.wait_data_ms = ms(t.ns[static_cast<int>(Stage::wait_data)]) / n;
  r.wait_comm_ms = ms(t.ns[static_cast<int>(Stage::wait_comm)]) / n;
  r.micro_steps = static_cast<double>(t.count[static_cast<int>(Stage::forward)]) / n;
  const int h2d = static_cast<int>(Stage::h2d);
  if (t.ns[h2d] > 0) r.h2d_gbps = static_cast<double>(t.bytes[h2d]) / t.ns[h2d];
}

// Allreduce: overlap with compute, skew against peers, transfer time.
void add_allreduce_measures(RankAnalysis& r, const RankData& d, const std::vector<RankData>& all, int world, double n) {
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
    a.sizes_known = ar_bytes > 0;  // our recorder always has them; Kineto only with record_shapes
  }
  r.skew_ms = ms(skew_total) / n;
}

// Loader: per-batch stage times of the batches these steps consumed, against the main thread's demand.
void add_loader_measures(RankAnalysis& r, const RankData& d, const records::job_config* job) {
  LoaderStats& L = r.loader;
  std::vector<uint64_t> batches;
  std::array<double, kStageCount> lt{};
  std::set<uint8_t> worker_lanes;
  // With num_workers=0 the training thread fetches its own batches, on its own lane: that lane is no worker.
  const int main_lane = d.main.empty() ? -1 : d.main.front().lane;
  for (const Span& s : d.loader) {
    if (!d.in(s.step)) continue;
    batches.push_back((static_cast<uint64_t>(s.epoch) << 32) | s.item);
    lt[static_cast<int>(s.stage)] += static_cast<double>(s.dur());
    if (s.lane != main_lane) worker_lanes.insert(s.lane);
  }
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  L.batches = static_cast<double>(batches.size());
  // Our job says how many workers it ran; of a user's, the lanes that delivered batches are what is known.
  L.workers = job ? job->workers : 0;
  if (L.workers <= 0) L.workers = static_cast<int>(worker_lanes.size());
  if (!batches.empty()) {
    for (Stage st : kLoaderStages) {
      double v = ms(lt[static_cast<int>(st)]) / L.batches;
      L.ms_per_batch[sname(st)] = v;
      L.batch_ms += v;
    }
    L.supply_ms_per_batch = L.workers > 0 ? L.batch_ms / L.workers : L.batch_ms;
  }
  if (r.micro_steps > 0) L.demand_ms_per_batch = std::max(0.0, r.step_ms - r.wait_data_ms) / r.micro_steps;
  if (L.demand_ms_per_batch > 0) {
    L.utilization = L.supply_ms_per_batch / L.demand_ms_per_batch;
    L.workers_needed = static_cast<int>(std::ceil(L.batch_ms / L.demand_ms_per_batch));
  }
  std::set<uint16_t> start_passes;
  for (const Span& s : d.starts) {
    L.worker_start_ms += ms(static_cast<double>(s.dur()));
    start_passes.insert(s.epoch);
  }
  L.burst = find_burst(d, L);
  L.worker_starts = static_cast<int>(d.starts.size());
  L.passes_starting_workers = static_cast<int>(start_passes.size());
  if (L.worker_starts) L.worker_start_ms /= L.worker_starts;
  double start_wait = 0;
  for (const Span& w : d.main)
    if (w.stage == Stage::wait_data && d.in(w.step))
      for (const Span& s : d.starts)
        if (s.t0 < w.t1 && s.t1 > w.t0) {
          start_wait += static_cast<double>(w.dur());
          break;
        }
  if (r.steps) L.start_wait_ms = ms(start_wait) / static_cast<double>(r.steps);
  const std::string prefix = kTransformStepMeta;
  for (auto it = d.trace->meta.lower_bound(prefix); it != d.trace->meta.end() && it->first.rfind(prefix, 0) == 0; ++it)
    L.transform_steps_ms[it->first.substr(prefix.size())] = ms(std::strtod(it->second.c_str(), nullptr));
  const auto& q = d.counters[static_cast<int>(Counter::loader_queue_depth)];
  if (!q.empty()) {
    int64_t a = d.steps.at(d.analysed.front()).t0, b = d.steps.at(d.analysed.back()).t1;
    uint64_t in = 0, zero = 0;
    for (const Sample& s : q)
      if (s.t >= a && s.t <= b) in++, zero += s.v == 0;
    if (in) L.queue_empty_fraction = static_cast<double>(zero) / static_cast<double>(in);
  }
}

}  // namespace

std::string manifest_backend(const RunTrace& run) {
  return run.manifest ? run.manifest->fields.backend.value_or("") : "";
}

RankAnalysis rank_stats(const RankData& d, const std::vector<RankData>& all, int world,
                        const records::job_config* job) {
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
  add_stage_measures(r, stage_totals(d), n);
  add_allreduce_measures(r, d, all, world, n);
  add_loader_measures(r, d, job);
  return r;
}

double stage_ms(const RankAnalysis& r, Stage stage) {
  auto it = r.stages_ms_per_step.find(sname(stage));
  return it == r.stages_ms_per_step.end() ? 0 : it->second;
}

double untracked_ms(const RankAnalysis& r) {
  double tracked = 0;
  for (Stage s : kMainWork) tracked += stage_ms(r, s);
  tracked += stage_ms(r, Stage::wait_comm);
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

std::string loader_supply_text(const LoaderStats& L) {
  // num_workers=0: no worker supplies anything; the training thread fetches each batch between its steps.
  if (L.workers == 0)
    return fmt(
        "the training thread loads each batch itself (num_workers=0): %.2f ms a batch in the step, beside %.2f "
        "ms of compute; %d DataLoader worker(s) would take it off the step",
        L.batch_ms, L.demand_ms_per_batch, std::max(1, L.workers_needed));
  std::string s = fmt("%d worker(s) supply a batch every %.2f ms, compute needs one every %.2f ms", L.workers,
                      L.supply_ms_per_batch, L.demand_ms_per_batch);
  if (L.utilization > 1 && L.workers_needed > L.workers) s += fmt(": %d would keep up", L.workers_needed);
  return s;
}

double loader_ms_per_batch(const RankAnalysis& r, Stage stage) {
  auto it = r.loader.ms_per_batch.find(sname(stage));
  return it == r.loader.ms_per_batch.end() ? 0 : it->second;
}

}  // namespace ddp::analysis_detail
