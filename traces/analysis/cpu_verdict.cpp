#include "traces/analysis/cpu_verdict.h"

#include <algorithm>
#include <map>

#include "traces/analysis/analysis_thresholds.h"
#include "traces/base/text_format.h"
#include "traces/rank_data/cpu_use.h"

namespace ddp::analysis_detail {
namespace {

using rank_data::CpuTime;
using rank_data::RankCpuUse;

double ms(double ns) { return ns / 1e6; }

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// Each stage's CPU time a step on one rank, the training thread's and the loader's together.
std::map<Stage, double> cpu_ms_per_step(const RankCpuUse& u, double steps) {
  std::map<Stage, double> out;
  for (const auto* stages : {&u.main, &u.loader})
    for (const auto& [stage, t] : *stages) out[stage] += ms(t.cpu_ns) / steps;
  return out;
}

// The {rank, stage} of `h` with the most CPU a step above the other ranks' mean for that stage, when that excess is at
// least kContentionCulpritShare of the host's CPU a step: its work is what the host's cores are short of.
void find_culprit(HostCpu& h, const std::vector<std::map<Stage, double>>& per_rank, const std::vector<int>& rank_of) {
  if (per_rank.size() < 2) return;
  double best = 0;
  for (int i : h.ranks) {
    for (const auto& [stage, mine] : per_rank[static_cast<size_t>(i)]) {
      double others = 0;
      for (size_t o = 0; o < per_rank.size(); ++o) {
        if (static_cast<int>(o) == i) continue;
        auto it = per_rank[o].find(stage);
        others += it == per_rank[o].end() ? 0 : it->second;
      }
      const double excess = mine - others / static_cast<double>(per_rank.size() - 1);
      if (excess > best)
        best = excess, h.culprit_rank = rank_of[static_cast<size_t>(i)], h.culprit_stage = rank_data::sname(stage);
    }
  }
  if (best < kContentionCulpritShare * h.cpu_ms_per_step) h.culprit_rank = -1, h.culprit_stage.clear();
  if (h.culprit_rank >= 0) h.culprit_excess_ms_per_step = best;
}

}  // namespace

std::vector<HostCpu> host_cpu(const std::vector<HostCores>& hosts, const std::vector<rank_data::RankData>& data,
                              std::vector<RankAnalysis>& ranks, double steps) {
  std::vector<RankCpuUse> use;
  std::vector<std::map<Stage, double>> per_rank;
  std::vector<int> rank_of;
  for (size_t i = 0; i < data.size(); ++i) {
    use.push_back(rank_data::cpu_use(data[i]));
    RankAnalysis& r = ranks[i];
    const double rank_steps = static_cast<double>(std::max<uint64_t>(r.steps, 1));
    per_rank.push_back(cpu_ms_per_step(use.back(), rank_steps));
    rank_of.push_back(data[i].rank);
    CpuTime main, loader;
    for (const auto& [stage, t] : use.back().main) main.add(t);
    for (const auto& [stage, t] : use.back().loader) loader.add(t);
    r.cpu_wait_ms = ms(main.wait_ns) / rank_steps;
    if (r.loader.batches > 0) r.loader.cpu_wait_ms_per_batch = ms(loader.wait_ns) / r.loader.batches;
  }
  std::vector<HostCpu> out;
  const double n = std::max(steps, 1.0);
  for (const HostCores& hc : hosts) {
    HostCpu h;
    h.host = hc.host;
    h.cores = hc.cores;
    CpuTime all;
    for (int i : hc.ranks) all.add(use[static_cast<size_t>(i)].all);
    if (all.spans == 0) continue;
    h.ranks = hc.ranks;
    h.cpu_ms_per_step = ms(all.cpu_ns) / n;
    h.wait_ms_per_step = ms(all.wait_ns) / n;
    h.stretch = all.stretch();
    h.runnable = h.wait_ms_per_step > 0 ? h.cores * (1 + h.stretch) : 0;
    h.saturated = all.waits_unknown < all.spans && h.stretch >= kCpuSaturatedStretch;
    if (h.saturated) find_culprit(h, per_rank, rank_of);
    for (int& i : h.ranks) i = rank_of[static_cast<size_t>(i)];  // indices into data, said as ranks
    out.push_back(std::move(h));
  }
  return out;
}

const HostCpu* saturated_host_of(const std::vector<HostCpu>& hosts, int rank) {
  for (const HostCpu& h : hosts)
    if (h.saturated && std::find(h.ranks.begin(), h.ranks.end(), rank) != h.ranks.end()) return &h;
  return nullptr;
}

double utilization_on_enough_cores(const RankAnalysis& r) {
  const LoaderStats& L = r.loader;
  const double demand = L.demand_ms_per_batch - r.cpu_wait_ms / std::max(r.micro_steps, 1.0);
  if (demand <= 0) return L.utilization;
  const double supply = std::max(0.0, L.batch_ms - L.cpu_wait_ms_per_batch) / std::max(L.workers, 1);
  return supply / demand;
}

std::string saturation_text(const HostCpu& h) {
  return fmt(
      "host %s is CPU-saturated: ~%.1f runnable threads on %g cores; each ms of CPU work waited %.2f ms for a "
      "core (%.1f ms/step waiting, %.1f ms/step on a CPU, spans of ranks %s)",
      h.host.c_str(), h.runnable, h.cores, h.stretch, h.wait_ms_per_step, h.cpu_ms_per_step,
      rank_list(h.ranks).c_str());
}

}  // namespace ddp::analysis_detail
