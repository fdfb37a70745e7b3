#include "traces/analysis/analysis_attribution.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "traces/analysis/analysis_measures.h"
#include "traces/analysis/analysis_thresholds.h"
#include "traces/analysis/cpu_verdict.h"
#include "traces/base/text_format.h"

namespace ddp::analysis_detail {
namespace {

// Who is charged: a rank (-1 = the collective itself) and a stage.
struct CauseKey {
  int rank = 0;
  CauseStage stage;
  // By rank, then stage name: the order equal-loss causes have always been reported in.
  bool operator<(const CauseKey& o) const {
    if (rank != o.rank) return rank < o.rank;
    return cause_stage_name(stage) < cause_stage_name(o.stage);
  }
};

// One piece of one stall instance: `ns` of the wait span (stage `shown`, starting at `at`) on rank `victim`.
struct Contribution {
  int victim = 0;
  Stage shown = Stage::wait_data;
  uint32_t step = 0;
  double ns = 0;
  int64_t at = 0;
};

using Contributions = std::map<CauseKey, std::vector<Contribution>>;

// Who is charged for the waits a saturated host causes (cpu_verdict.h): the {rank, stage} whose CPU above the other
// ranks' saturates it, else the host's cores.
CauseKey contention_cause(const HostCpu& h) {
  if (h.culprit_rank >= 0)
    if (auto st = stage_from_name(h.culprit_stage)) return {h.culprit_rank, *st};
  return {-1, CauseStage::saturated_cores()};
}

// Who is to blame for a rank's data waits: a burst's stage when batches slower than the queue hides hold them
// (loader_burst.h); wait_data itself when the rank recorded no loader spans or its loader keeps up
// (kLoaderKeepsUpUtilization: no stage of it makes the rank wait, however it compares with the other ranks'); on a
// saturated host (cpu_verdict.h), the host's contention when the loader keeps up or would with the cores it needs
// (kLoaderKeepsUpOnEnoughCores); else the loader stage most above the other ranks' (when clearly above), else the
// largest per batch.
CauseKey loader_cause(const std::vector<RankAnalysis>& ra, size_t r, const std::vector<HostCpu>& hosts) {
  const LoaderStats& L = ra[r].loader;
  const int rank = ra[r].rank;
  if (L.ms_per_batch.empty()) return {rank, Stage::wait_data};
  if (L.burst.found) return {rank, L.burst.stage};
  const bool keeps_up = L.utilization > 0 && L.utilization <= kLoaderKeepsUpUtilization;
  if (const HostCpu* h = saturated_host_of(hosts, rank))
    if (keeps_up || utilization_on_enough_cores(ra[r]) < kLoaderKeepsUpOnEnoughCores) return contention_cause(*h);
  if (keeps_up) return {rank, Stage::wait_data};
  std::optional<Stage> best_excess, best_abs;
  double ex = 0, ab = -1;
  for (Stage st : kLoaderStages) {
    double m = loader_ms_per_batch(ra[r], st);
    double peer = 0;
    int np = 0;
    for (size_t o = 0; o < ra.size(); ++o) {
      if (o == r || ra[o].loader.ms_per_batch.empty()) continue;
      peer += loader_ms_per_batch(ra[o], st);
      np++;
    }
    if (np) {
      double e = m - peer / np;
      if (e > ex && e > kLoaderCauseMinExcess * m && e >= kLoaderCauseMinBatchShare * L.batch_ms)
        ex = e, best_excess = st;
    }
    if (m > ab) ab = m, best_abs = st;
  }
  return {rank, best_excess ? *best_excess : *best_abs};
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

// The sync a wait_comm span waits for, and the last peer launch among its buckets.
struct AwaitedSync {
  uint8_t micro = 0;                                          // the sync's micro-step
  int64_t last_launch = std::numeric_limits<int64_t>::min();  // the latest peer launch of its buckets
  int late_rank = -1;                                         // the peer that launched it; -1 when no peer launched any
};

AwaitedSync awaited_sync(const RankData& d, const std::vector<RankData>& data, const Span& w, uint32_t step) {
  AwaitedSync out;
  out.micro = w.micro;
  auto ar = d.ar_by_step.find(step);
  if (ar == d.ar_by_step.end()) return out;
  // A wait in a micro-step without its own allreduce waits for the step's last sync.
  bool any_micro = false;
  for (size_t k : ar->second) any_micro |= d.allreduce[k].micro == w.micro;
  if (!any_micro) {
    out.micro = 0;
    for (size_t k : ar->second) out.micro = std::max(out.micro, d.allreduce[k].micro);
  }
  for (size_t k : ar->second) {
    const Span& b = d.allreduce[k];
    if (b.micro != out.micro) continue;
    int who = -1;
    int64_t p = peer_launch(data, d.rank, bucket_key(b.step, b.micro, b.bucket), &who);
    if (p > out.last_launch) out.last_launch = p, out.late_rank = who;
  }
  return out;
}

// Where the comparison windows of the victim (`me`) and the late peer start: the completion of the previous sync (the
// later of the two ranks'), a moment common to both; without one, each rank's previous wait_comm end, else its step
// start.
std::pair<int64_t, int64_t> window_starts(const RankData& me, const RankData& peer, const Span& w, uint32_t step,
                                          const AwaitedSync& sync) {
  auto prev_end = [](const RankData& x, int64_t before, uint32_t st) {
    auto it = std::upper_bound(x.wait_comm.begin(), x.wait_comm.end(), before,
                               [](int64_t t, const Span& sp) { return t < sp.t1; });
    if (it != x.wait_comm.begin()) return std::prev(it)->t1;
    auto s = x.steps.find(st);
    return s != x.steps.end() ? s->second.t0 : before;
  };
  int64_t me0 = prev_end(me, w.t0, step), pe0 = prev_end(peer, sync.last_launch, step);
  auto prev = me.sync_done.lower_bound(sync_key(step, sync.micro));
  if (prev != me.sync_done.begin()) {
    --prev;
    int64_t done = prev->second;
    auto pp = peer.sync_done.find(prev->first);
    if (pp != peer.sync_done.end()) done = std::max(done, pp->second);
    if (done < w.t0 && done < sync.last_launch) me0 = pe0 = done;
  }
  return {me0, pe0};
}

// Why the peer was late: every main stage where it spent more than the victim since the window start, weighted by
// that excess (its wait_data charged to its loader stage); all to `other` when no stage is above.
std::vector<std::pair<CauseKey, double>> lateness_weights(const WindowSums& mine, const WindowSums& theirs, int late,
                                                          const CauseKey& peer_loader_cause, double& total) {
  std::vector<std::pair<CauseKey, double>> weights;
  total = 0;
  for (Stage st : kMainWork) {
    double dl = theirs.stage[static_cast<int>(st)] - mine.stage[static_cast<int>(st)];
    if (dl <= 0) continue;
    weights.push_back({st == Stage::wait_data ? peer_loader_cause : CauseKey{late, st}, dl});
    total += dl;
  }
  if (theirs.other > mine.other) {
    weights.push_back({{late, std::nullopt}, theirs.other - mine.other});
    total += theirs.other - mine.other;
  }
  if (total <= 0) weights = {{{late, std::nullopt}, 1.0}}, total = 1.0;
  return weights;
}

int index_of_rank(const std::vector<RankData>& data, int rank) {
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i].rank == rank) return static_cast<int>(i);
  return -1;
}

// Who is charged for a collective's own exposed time: {-1, allreduce}; on a saturated host that holds every rank (a
// single-host job: the collective's threads wait for a core as every thread does, and its transfer is a copy between
// processes), the host's contention.
CauseKey exposed_cause(const std::vector<HostCpu>& hosts, size_t world) {
  for (const HostCpu& h : hosts)
    if (h.saturated && h.ranks.size() == world) return contention_cause(h);
  return {-1, Stage::allreduce};
}

// Splits one wait_comm span: the part before the late peer's launch (skew) goes to what made the peer late, the rest
// (the collective's own exposed transfer) to `exposed_to`.
void charge_wait_comm(const std::vector<RankData>& data, const std::vector<CauseKey>& loader_causes,
                      const CauseKey& exposed_to, const RankData& d, const Span& w, uint32_t step,
                      Contributions& contrib) {
  const AwaitedSync sync = awaited_sync(d, data, w, step);
  const int late = sync.late_rank;
  int64_t skew = late < 0 ? 0 : std::clamp<int64_t>(sync.last_launch - w.t0, 0, w.dur());
  double exposed = static_cast<double>(w.dur() - skew);
  if (exposed > 0) contrib[exposed_to].push_back({d.rank, Stage::wait_comm, step, exposed, w.t0});
  if (skew <= 0) return;
  // Why was the peer late? Compare what each main thread did since the previous collective completed (a moment
  // common to both ranks; a rank still busy then, e.g. in a slow backward tail, shows that work in the window).
  const int pi = index_of_rank(data, late);
  const RankData& p = data[static_cast<size_t>(pi)];
  const auto [me0, pe0] = window_starts(d, p, w, step, sync);
  WindowSums mine = window_sums(d, me0, w.t0), theirs = window_sums(p, pe0, sync.last_launch);
  double total = 0;
  const auto weights = lateness_weights(mine, theirs, late, loader_causes[static_cast<size_t>(pi)], total);
  for (const auto& [key, weight] : weights)
    contrib[key].push_back({d.rank, Stage::wait_comm, step, static_cast<double>(skew) * weight / total, w.t0});
}

// A wait for data while one of the rank's DataLoader workers was still starting (a pass that starts its workers:
// every epoch without persistent_workers) waited for the start-up, not for a batch's stages.
bool during_worker_start(const RankData& d, const Span& w) {
  for (const Span& s : d.starts) {
    if (s.t0 >= w.t1) break;
    if (s.t1 > w.t0) return true;
  }
  return false;
}

Contributions charge_waits(const std::vector<RankData>& data, const std::vector<RankAnalysis>& ranks,
                           const std::vector<uint32_t>& common, const std::vector<HostCpu>& hosts) {
  std::vector<CauseKey> loader_causes;
  for (size_t i = 0; i < ranks.size(); ++i) loader_causes.push_back(loader_cause(ranks, i, hosts));
  const CauseKey exposed_to = exposed_cause(hosts, data.size());
  Contributions contrib;
  for (size_t ri = 0; ri < data.size(); ++ri) {
    const RankData& d = data[ri];
    for (uint32_t s : common) {
      auto ms_it = d.main_by_step.find(s);
      if (ms_it == d.main_by_step.end()) continue;
      for (size_t idx : ms_it->second) {
        const Span& w = d.main[idx];
        if (w.dur() <= 0) continue;
        // Loaders are per rank: input waits are always the rank's own loader's.
        if (w.stage == Stage::wait_data)
          contrib[during_worker_start(d, w) ? CauseKey{d.rank, Stage::worker_start} : loader_causes[ri]].push_back(
              {d.rank, Stage::wait_data, s, static_cast<double>(w.dur()), w.t0});
        else if (w.stage == Stage::wait_comm)
          charge_wait_comm(data, loader_causes, exposed_to, d, w, s, contrib);
      }
    }
  }
  return contrib;
}

// Sums one cause's pieces: the job loses a stall once per step (the largest any single victim waited), not once per
// victim. Returns false when the cause is below kMinCauseShare.
bool sum_cause(const CauseKey& key, const std::vector<Contribution>& list, double nsteps, double step_ms,
               int64_t origin_ns, StallCause& c) {
  c.rank = key.rank;
  c.stage = cause_stage_name(key.stage);
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
  c.share = step_ms > 0 ? c.lost_ms_per_step / step_ms : 0;
  if (c.share < kMinCauseShare) return false;
  for (const auto& [vk, ns] : victims) c.victims.push_back({vk.first, sname(vk.second), ms(ns)});
  if (at) c.at_ns = at->at - origin_ns, c.at_rank = at->victim, c.at_step = at->step;
  return true;
}

// A rank's own input: its waits for data, charged to its loader's stages.
bool is_input_cause(const CauseStage& s) {
  return s && (*s == Stage::wait_data || *s == Stage::worker_start || stage_has(*s, kStageLoaderThread));
}

// The input causes of one stage, one per rank, when every rank of `world` has one and they are about equal
// (kSharedInputCauseRatio): folded into one cause of every rank (rank -1). The job loses at least the largest.
std::optional<StallCause> shared_input_cause(const std::vector<StallCause>& same_stage, size_t world) {
  if (world < 2 || same_stage.size() != world) return std::nullopt;
  auto by_loss = [](const StallCause& a, const StallCause& b) { return a.lost_ms < b.lost_ms; };
  const StallCause& least = *std::min_element(same_stage.begin(), same_stage.end(), by_loss);
  const StallCause& most = *std::max_element(same_stage.begin(), same_stage.end(), by_loss);
  if (least.lost_ms < kSharedInputCauseRatio * most.lost_ms) return std::nullopt;
  StallCause c = most;
  c.rank = -1;
  c.victims.clear();
  nlohmann::json per_rank = nlohmann::json::object();
  for (const StallCause& x : same_stage) {
    per_rank[std::to_string(x.rank)] = x.lost_ms_per_step;
    c.victims.insert(c.victims.end(), x.victims.begin(), x.victims.end());
  }
  c.evidence = {{"lost_ms_per_step", c.lost_ms_per_step}, {"per_rank_lost_ms_per_step", per_rank}};
  // The worst rank's own sentence says why (the stage, the loader's supply against demand, the advice).
  c.explanation = fmt("every rank waits for its own input, %.2f-%.2f ms/step (%s), not one rank's; worst: %s",
                      least.lost_ms_per_step, most.lost_ms_per_step, c.stage.c_str(), most.explanation.c_str());
  return c;
}

}  // namespace

std::vector<StallCause> attribute_stalls(const std::vector<RankData>& data, const std::vector<RankAnalysis>& ranks,
                                         const std::vector<uint32_t>& common, double step_ms, int64_t origin_ns,
                                         const std::vector<HostCpu>& hosts) {
  const double nsteps = static_cast<double>(std::max<size_t>(common.size(), 1));
  std::vector<StallCause> causes;
  std::map<std::string, std::vector<StallCause>> input_causes;  // by stage: the ranks' own input waits
  for (const auto& [key, list] : charge_waits(data, ranks, common, hosts)) {
    StallCause c;
    if (!sum_cause(key, list, nsteps, step_ms, origin_ns, c)) continue;
    explain(c, key.stage, ranks, hosts);
    if (c.rank >= 0 && is_input_cause(key.stage)) input_causes[c.stage].push_back(c);
    causes.push_back(std::move(c));
  }
  for (const auto& [input_stage, same_stage] : input_causes)
    if (auto shared = shared_input_cause(same_stage, data.size())) {
      const auto stage = input_stage;  // a structured binding cannot be captured in C++17 (clang refuses it)
      causes.erase(std::remove_if(causes.begin(), causes.end(),
                                  [&](const StallCause& c) { return c.rank >= 0 && c.stage == stage; }),
                   causes.end());
      causes.push_back(std::move(*shared));
    }
  std::stable_sort(causes.begin(), causes.end(),
                   [](const StallCause& x, const StallCause& y) { return x.lost_ms > y.lost_ms; });
  return causes;
}

}  // namespace ddp::analysis_detail
