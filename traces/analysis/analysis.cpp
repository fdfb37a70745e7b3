// analyze(): runs the steps of the stall analysis in order and writes the verdict.
#include "traces/analysis/analysis.h"

#include <algorithm>

#include "traces/analysis/analysis_attribution.h"
#include "traces/analysis/analysis_flags.h"
#include "traces/analysis/analysis_measures.h"
#include "traces/analysis/cpu_verdict.h"
#include "traces/analysis/replay_what_if.h"
#include "traces/base/text_format.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/contention.h"

namespace ddp {
namespace {

using namespace analysis_detail;

double mean_step_ms(const std::vector<RankAnalysis>& ranks) {
  double sum = 0;
  int n = 0;
  for (const RankAnalysis& r : ranks)
    if (r.steps) sum += r.step_ms, n++;
  return n ? sum / n : 0;
}

// Share of step time in h2d, forward, backward and optimizer, averaged over the ranks with steps.
double compute_share(const std::vector<RankAnalysis>& ranks) {
  double compute = 0;
  int n = 0;
  for (const RankAnalysis& r : ranks) {
    if (!r.steps || r.step_ms <= 0) continue;
    compute += (stage_ms(r, Stage::h2d) + stage_ms(r, Stage::forward) + stage_ms(r, Stage::backward) +
                stage_ms(r, Stage::optimizer)) /
               r.step_ms;
    n++;
  }
  return n ? compute / n : 0;
}

std::string verdict(const Analysis& a) {
  if (a.steps == 0) return "no complete steps to analyse";
  if (!a.causes.empty() && a.causes.front().share >= kDominantShare) {
    const StallCause& c = a.causes.front();
    if (c.rank < 0 && c.stage == sname(Stage::allreduce))
      return fmt("communication bound: exposed allreduce costs %.2f ms/step (%.0f%% of step time)", c.lost_ms_per_step,
                 100 * c.share);
    if (c.rank < 0 && c.stage == kCoresCauseName)
      return fmt("CPU saturated: threads wait for a core, %.2f ms/step (%.0f%% of step time); %s", c.lost_ms_per_step,
                 100 * c.share,
                 c.evidence.contains("runnable_threads")
                     ? fmt("~%.1f runnable threads on %g cores", c.evidence["runnable_threads"].get<double>(),
                           c.evidence["cores"].get<double>())
                           .c_str()
                     : "");
    if (c.rank < 0)  // every rank's own input, about equally (analysis_attribution.cpp)
      return fmt("input bound: all ranks wait for their input (%s), %.2f ms/step (%.0f%% of step time)",
                 c.stage.c_str(), c.lost_ms_per_step, 100 * c.share);
    return fmt("dominant stall: rank %d %s costs %.2f ms/step (%.0f%% of step time)", c.rank, c.stage.c_str(),
               c.lost_ms_per_step, 100 * c.share);
  }
  std::string v = fmt("no dominant stall: compute bound (h2d+forward+backward+optimizer %.0f%% of step time)",
                      100 * compute_share(a.ranks));
  if (!a.causes.empty()) {
    const StallCause& c = a.causes.front();
    v += fmt("; largest stall %s %s %.1f%%", c.rank < 0 ? "all ranks" : fmt("rank %d", c.rank).c_str(), c.stage.c_str(),
             100 * c.share);
  }
  return v;
}

}  // namespace

Analysis analyze(const RunTrace& run) {
  Analysis a;
  a.problems = run.problems;
  const records::job_config* job = run.job();
  a.world = static_cast<int>(run.world_size());

  std::vector<RankData> data;
  data.reserve(run.ranks.size());
  for (const RankTrace& t : run.ranks) data.push_back(prepare(t));
  index_peer_launches(data);
  for (const RankData& d : data) {
    a.ranks.push_back(rank_stats(d, data, std::max(a.world, 1), job));
    if (d.steps.empty()) a.problems.push_back("rank " + std::to_string(d.rank) + ": no steps recorded");
  }

  const std::vector<uint32_t> common = common_steps(data);
  if (!data.empty()) a.warmup_steps = data.front().steps.size() - data.front().analysed.size();
  a.steps = common.size();
  a.step_ms = mean_step_ms(a.ranks);
  const std::vector<HostCores> hosts = host_cores(run, data);
  a.cpu = host_cpu(hosts, data, a.ranks, static_cast<double>(common.size()));
  a.causes = attribute_stalls(data, a.ranks, common, a.step_ms, run.origin_ns(), a.cpu);
  add_what_if(a, data, common, hosts);
  add_flags(a, data, job, manifest_backend(run));
  a.gpu = gpu_time(run);
  a.verdict = verdict(a);
  return a;
}

}  // namespace ddp
