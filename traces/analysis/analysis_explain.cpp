// The evidence and the one readable sentence of each stall cause (StallCause::evidence, ::explanation).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "traces/analysis/analysis_attribution.h"
#include "traces/analysis/analysis_measures.h"
#include "traces/analysis/cpu_verdict.h"
#include "traces/analysis/loader_burst.h"
#include "traces/base/text_format.h"

namespace ddp::analysis_detail {
namespace {

// The collective's own cost: exposed after backward on every rank.
void explain_collective(StallCause& c, nlohmann::json& ev, const std::vector<RankAnalysis>& ra) {
  double exposed = 0, t = 0, bytes = 0, alg = 0, bus = 0, ov = 0, cnt = 0;
  int n = 0;
  for (const RankAnalysis& x : ra) {
    if (!x.steps) continue;
    exposed += x.wait_comm_ms, t += x.allreduce.time_ms_per_step, bytes += x.allreduce.bytes_per_step;
    alg += x.allreduce.algbw_gbps, bus += x.allreduce.busbw_gbps, ov += x.overlap_pct,
        cnt += x.allreduce.count_per_step;
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
  bool sizes = true;
  for (const RankAnalysis& x : ra) sizes = sizes && (!x.steps || x.allreduce.sizes_known);
  if (!sizes) {
    // Unknown, not zero: PyTorch's profiler records message sizes only with record_shapes=True.
    for (const char* k : {"bytes_per_step", "algbw_gbps", "busbw_gbps"}) ev[k] = nullptr;
    ev["sizes_known"] = false;
    c.explanation =
        fmt("allreduce is not hidden behind backward: %.2f ms/step exposed after backward; %.0f buckets, "
            "%.0f%% overlapped; message sizes are not in the trace (PyTorch's profiler writes them with "
            "record_shapes=True, in record_param_comms: NCCL; Gloo on CPU writes none)",
            c.lost_ms_per_step, cnt, ov);
    return;
  }
  c.explanation =
      fmt("allreduce is not hidden behind backward: %.2f ms/step exposed after backward; %.0f buckets, %.2f MB/step "
          "at busbw %.2f GB/s, %.0f%% overlapped",
          c.lost_ms_per_step, cnt, bytes / 1e6, bus, ov);
}

// "; of it: Sleep 62%, RandomResizedCrop 21%, ToTensor 9%": a Compose's three costliest steps, when they were timed.
std::string transform_steps_text(const std::map<std::string, double>& steps) {
  std::vector<std::pair<double, std::string>> by_cost;
  double total = 0;
  for (const auto& [name, v] : steps) by_cost.push_back({v, name}), total += v;
  if (total <= 0) return "";
  std::sort(by_cost.rbegin(), by_cost.rend());
  std::string out = "; of it: ";
  for (size_t i = 0; i < by_cost.size() && i < 3; ++i)
    out += fmt("%s%s %.0f%%", i ? ", " : "", by_cost[i].second.c_str(), 100 * by_cost[i].first / total);
  return out;
}

// A loader stage of rank r: its per-batch times against the other ranks' and the loader's supply against demand.
void explain_loader(StallCause& c, Stage stage, nlohmann::json& ev, const RankAnalysis& r,
                    const std::vector<RankAnalysis>& ra) {
  const LoaderStats& L = r.loader;
  ev["wait_data_ms_per_step"] = r.wait_data_ms;
  ev["loader_ms_per_batch"] = L.ms_per_batch;
  std::map<std::string, double> peer;
  for (Stage s : kLoaderStages)
    peer[sname(s)] = peer_mean(ra, c.rank, [&](const RankAnalysis& x) { return loader_ms_per_batch(x, s); });
  if (ra.size() > 1) ev["peer_loader_ms_per_batch"] = peer;
  ev["workers"] = L.workers;
  ev["loader_batch_ms"] = L.batch_ms;
  ev["supply_ms_per_batch"] = L.supply_ms_per_batch;
  ev["demand_ms_per_batch"] = L.demand_ms_per_batch;
  ev["loader_utilization"] = L.utilization;
  if (L.queue_empty_fraction >= 0) ev["queue_empty_fraction"] = L.queue_empty_fraction;
  const double mine = loader_ms_per_batch(r, stage);
  ev["workers_needed"] = L.workers_needed;
  if (!L.transform_steps_ms.empty()) ev["transform_steps_ms"] = L.transform_steps_ms;
  c.explanation = fmt("rank %d's loader is slow in %s (%.2f ms/batch%s%s); %s", c.rank, c.stage.c_str(), mine,
                      ra.size() > 1 ? fmt(" vs %.2f on other ranks", peer[c.stage]).c_str() : "",
                      stage == Stage::transform ? transform_steps_text(L.transform_steps_ms).c_str() : "",
                      loader_supply_text(L).c_str());
}

// Waits for data while rank r's DataLoader workers were starting: how often they start and what a start costs.
void explain_worker_start(StallCause& c, nlohmann::json& ev, const RankAnalysis& r) {
  const LoaderStats& L = r.loader;
  ev["worker_starts"] = L.worker_starts;
  ev["passes_starting_workers"] = L.passes_starting_workers;
  ev["worker_start_ms"] = L.worker_start_ms;
  c.explanation =
      fmt("rank %d waits for its DataLoader workers to start: %d start(s) over %d pass(es), %.2f ms each "
          "(process start and worker_init_fn)%s",
          c.rank, L.worker_starts, L.passes_starting_workers, L.worker_start_ms,
          L.passes_starting_workers > 1 ? "; they start again every epoch: persistent_workers=True "
                                          "keeps them"
                                        : "");
}

// The cores of a saturated host: waits no stage would have with the cores it needs, and no rank's work above the
// others' to blame. The advice: fewer runnable threads, or more cores.
void explain_cores(StallCause& c, nlohmann::json& ev, const std::vector<RankAnalysis>& ra,
                   const std::vector<HostCpu>& hosts) {
  const HostCpu* h = nullptr;
  for (const HostCpu& x : hosts)
    if (x.saturated && (!h || x.stretch > h->stretch)) h = &x;
  if (!h) return;
  ev["host"] = h->host;
  ev["cores"] = h->cores;
  ev["runnable_threads"] = h->runnable;
  ev["stretch"] = h->stretch;
  ev["wait_for_cpu_ms_per_step"] = h->wait_ms_per_step;
  int workers = 0;
  for (const RankAnalysis& r : ra) workers += r.loader.workers;
  c.explanation =
      fmt("%s: input and collectives wait for a core, not for a slow stage; fewer threads (%d DataLoader "
          "worker(s) on the host, torch.set_num_threads) or more cores would give the time back",
          saturation_text(*h).c_str(), workers);
}

// Batches slower than the queue hides hold the rank's waits (loader_burst.h): said with those batches and the queue
// that would hide them.
void explain_burst(StallCause& c, nlohmann::json& ev, const RankAnalysis& r) {
  const LoaderBurst& b = r.loader.burst;
  ev["burst"] = {{"batches", b.batches},
                 {"slow_batches", b.slow_batches},
                 {"slow_fetch_ms", b.slow_fetch_ms},
                 {"typical_fetch_ms", b.typical_fetch_ms},
                 {"queue_depth", b.depth},
                 {"queue_lead_ms", b.queue_lead_ms},
                 {"wait_share", b.wait_share},
                 {"prefetch_to_hide", b.prefetch_to_hide},
                 {"workers_to_hide", b.workers_to_hide}};
  c.explanation = burst_text(b, c.rank);
}

// A main-thread stage (or untracked time) of rank r against the other ranks'.
void explain_main_thread(StallCause& c, const CauseStage& stage, nlohmann::json& ev, const RankAnalysis& r,
                         const std::vector<RankAnalysis>& ra) {
  auto time_of = [&](const RankAnalysis& x) { return stage ? stage_ms(x, *stage) : untracked_ms(x); };
  const double mine = time_of(r);
  const double peer = peer_mean(ra, c.rank, time_of);
  ev["stage_ms_per_step"] = mine;
  if (ra.size() > 1) {
    ev["peer_stage_ms_per_step"] = peer;
    ev["excess_ms_per_step"] = mine - peer;
  }
  if (stage == Stage::wait_data && r.loader.batches > 0)
    c.explanation =
        fmt("rank %d waits %.2f ms/step for input though its loader keeps up (%s): no loader stage is "
            "slow; the batches reach the training thread late (its workers share the CPU with it, or "
            "the hand-off from them is slow)",
            c.rank, std::max(0.0, mine - r.loader.start_wait_ms), loader_supply_text(r.loader).c_str());
  else if (stage == Stage::wait_data)
    c.explanation =
        fmt("rank %d waits %.2f ms/step for input and no loader spans were recorded to say why", c.rank, mine);
  else
    c.explanation =
        fmt("rank %d spends %.2f ms/step in %s%s", c.rank, mine, stage ? c.stage.c_str() : "untracked main-thread time",
            ra.size() > 1 ? fmt(" vs %.2f on other ranks, which wait for it in allreduce", peer).c_str() : "");
}

}  // namespace

void explain(StallCause& c, const CauseStage& stage, const std::vector<RankAnalysis>& ranks,
             const std::vector<HostCpu>& hosts) {
  nlohmann::json ev = nlohmann::json::object();
  ev["lost_ms_per_step"] = c.lost_ms_per_step;
  const RankAnalysis* r = find_rank(ranks, c.rank);
  if (stage.cores)
    explain_cores(c, ev, ranks, hosts);
  else if (c.rank < 0 || !r)
    explain_collective(c, ev, ranks);
  else if (stage && *stage == Stage::worker_start)
    explain_worker_start(c, ev, *r);
  else if (stage && r->loader.burst.found && *stage == r->loader.burst.stage)
    explain_burst(c, ev, *r);
  else if (stage && stage_has(*stage, kStageLoaderThread))
    explain_loader(c, *stage, ev, *r, ranks);
  else
    explain_main_thread(c, stage, ev, *r, ranks);
  // A culprit's CPU saturates its host: the waits it causes on every thread are its too (cpu_verdict.h).
  for (const HostCpu& h : hosts)
    if (h.saturated && h.culprit_rank == c.rank && h.culprit_rank >= 0 && h.culprit_stage == c.stage) {
      ev["saturates_host"] = h.host;
      ev["cpu_excess_ms_per_step"] = h.culprit_excess_ms_per_step;
      c.explanation += fmt("; its CPU, %.2f ms/step above the other ranks', saturates the host: %s",
                           h.culprit_excess_ms_per_step, saturation_text(h).c_str());
    }
  c.evidence = std::move(ev);
}

}  // namespace ddp::analysis_detail
