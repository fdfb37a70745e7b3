// The replay of replay.h: the measured and the edited plan run (replay_run.h), their steps against the measured; the
// predicted run as traces (replay_predicted.cpp) only when asked.
#include "traces/replay/replay.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "traces/base/stats.h"
#include "traces/base/text_format.h"
#include "traces/replay/contention.h"
#include "traces/replay/replay_graph.h"
#include "traces/replay/replay_run.h"

namespace ddp {
namespace {

using namespace replay_graph;

// The least step the hosts' cores allow the edited work, and which host says so.
struct HostBound {
  double ns = 0;
  std::string why;
};
HostBound host_bound(const std::vector<HostCores>& hosts, const std::vector<Chain>& cs, const Plan& p, double steps,
                     double cores) {
  HostBound b;
  for (const HostCores& h : hosts) {
    const double ns = cpu_bound_step_ns(h, p, cs, steps, cores);
    if (ns <= b.ns) continue;
    const double m = cores > 0 ? cores : h.cores;
    b.ns = ns;
    b.why =
        fmt("the cores are saturated: %s's ranks would need %.2f ms of CPU a step on %g cores, no step shorter than "
            "%.2f ms",
            h.host.c_str(), ms(ns) * m, m, ms(ns));
  }
  return b;
}

// The cores an edit gives each host (cores=N), 0 when none does.
double edited_cores(const std::vector<ReplayEdit>& edits) {
  for (const ReplayEdit& e : edits)
    if (e.kind == ReplayEdit::Kind::cores) return e.value;
  return 0;
}

std::map<std::string, double> per_stage_ms(const Timeline& tl, double rank_steps) {
  std::map<std::string, double> out;
  for (size_t s = 0; s < tl.stage_ns.size(); ++s)
    if (tl.stage_ns[s] > 0)
      out[s == 256 ? "other" : sname(static_cast<Stage>(s))] = ms(tl.stage_ns[s] / std::max(1.0, rank_steps));
  return out;
}

}  // namespace

std::optional<ReplayEdit> edit_for_traces(const ReplayEdit& e, const std::vector<RankData>& data) {
  if (e.kind != ReplayEdit::Kind::stage_as_median) return e;
  ReplayEdit on_traces = e;
  on_traces.rank = rank_index(data, e.rank);
  if (on_traces.rank < 0) return std::nullopt;
  return on_traces;
}

// The run made ready: its chains, the plan as measured, the transfer model, each host's load as measured, and the
// replay as measured.
struct RunReplay::Prepared {
  Prepared(const std::vector<RankData>& d, const std::vector<uint32_t>& c, const std::vector<HostCores>& h)
      : data(d), common(c), hosts(h) {}
  const std::vector<RankData>& data;
  const std::vector<uint32_t>& common;
  const std::vector<HostCores> hosts;  // a copy: a few hosts
  std::vector<Chain> chains;
  Plan measured;
  CommModel model;
  int world = 0;
  Timeline fit;
  std::vector<HostLoad> loads;  // per host
};

RunReplay::RunReplay(const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                     const std::vector<HostCores>& hosts)
    : run_(std::make_unique<Prepared>(data, common, hosts)) {
  if (data.empty() || common.empty()) return;
  Prepared& p = *run_;
  p.chains = build_chains(data, common);
  p.measured = measured_plan(p.chains);
  p.model = fit_comm(p.measured);
  p.world =
      std::max(static_cast<int>(data.size()), data.front().trace ? static_cast<int>(data.front().trace->world) : 0);
  p.fit = run_chains(p.chains, p.measured);
  for (const HostCores& h : p.hosts) p.loads.push_back(measured_load(h, p.chains, p.measured));
}

RunReplay::~RunReplay() = default;

// With edits, the edited replay: the chains with their micro-steps repeated (accum=K) or as they are, the plan the
// edits change, each host's waits for a core as they leave them, run; "" or why the run cannot take the edits. Sets
// `res`'s stretch after the edits and its predicted traces (with `predicted`); `bound_ns` the least step the hosts'
// cores allow (why in res.saturated).
std::string RunReplay::edited(const std::vector<ReplayEdit>& edits, PredictedRun* predicted, Timeline& out,
                              ReplayResult& res, double& bound_ns) const {
  const Prepared& p = *run_;
  std::vector<Chain> accumulated;  // the chains with their micro-steps repeated, when an edit asks for it
  bool repeated = false;
  for (const ReplayEdit& e : edits)
    if (e.kind == ReplayEdit::Kind::accumulate && e.value > 1) {
      if (!repeated) accumulated = p.chains, repeated = true;
      if (std::string err = accumulate(accumulated, static_cast<int>(e.value)); !err.empty()) return err;
    }
  const std::vector<Chain>& chains = repeated ? accumulated : p.chains;
  Plan plan = measured_plan(chains);
  if (std::string err = edit_plan(plan, chains, edits, p.model, p.world); !err.empty()) return err;
  const double cores = edited_cores(edits);
  if (cores > 0 && p.hosts.empty())
    return "cores=N needs the ranks' cores and their spans' waits for one: a run recorded by this version (its "
           "manifest's ranks[].cpu and each span's CPU split)";
  res.stretch_after = apply_contention(plan, chains, p.loads, p.hosts, cores);
  out = run_chains(chains, plan, predicted);
  const HostBound bound = host_bound(p.hosts, chains, plan, static_cast<double>(p.common.size()), cores);
  bound_ns = bound.ns;
  res.saturated = bound.why;
  if (predicted) res.predicted = predicted->finish(chains, plan, out);
  return {};
}

ReplayResult RunReplay::replay(const std::vector<ReplayEdit>& edits, bool keep_trace) const {
  const Prepared& p = *run_;
  const std::vector<RankData>& data = p.data;
  ReplayResult res;
  if (data.empty() || p.common.empty()) {
    res.error = "no steps in common to replay";
    return res;
  }
  res.comm_fixed_ms = ms(p.model.fixed_ns);
  res.comm_bus_bytes_per_s = p.model.ns_per_byte > 0 ? ring_factor(p.world) * 1e9 / p.model.ns_per_byte : 0;
  for (const HostLoad& l : p.loads) res.stretch_measured.push_back(l.stretch());
  res.stretch_after = res.stretch_measured;
  // The predicted run's traces come from the replay that predicts: the edited one, or the fit run again with them.
  std::optional<PredictedRun> predicted;
  if (keep_trace) predicted.emplace(data, p.world);
  Timeline edited_run;
  const Timeline& fit = p.fit;
  const Timeline* what_if = &fit;
  double bound_ns = 0;
  if (!edits.empty()) {
    res.error = edited(edits, predicted ? &*predicted : nullptr, edited_run, res, bound_ns);
    if (!res.error.empty()) return res;
    what_if = &edited_run;
  } else if (predicted) {
    const Timeline again = run_chains(p.chains, p.measured, &*predicted);
    res.predicted = predicted->finish(p.chains, p.measured, again);
  }
  const std::vector<uint32_t>& common = p.common;
  std::vector<double> errors;
  double replayed_sum = 0, measured_sum = 0, fit_sum = 0;
  for (uint32_t s : common) {
    double measured_ns = 0, replayed = 0, edited = 0;
    int n = 0;
    for (size_t r = 0; r < data.size(); ++r) {
      auto iv = data[r].steps.find(s);
      auto f = fit.steps[r].find(s);
      auto w = what_if->steps[r].find(s);
      if (iv == data[r].steps.end() || f == fit.steps[r].end() || w == what_if->steps[r].end()) continue;
      measured_ns += static_cast<double>(iv->second.t1 - iv->second.t0);
      replayed += static_cast<double>(f->second.second - f->second.first);
      edited += static_cast<double>(w->second.second - w->second.first);
      ++n;
    }
    if (n == 0 || measured_ns <= 0) continue;
    errors.push_back(std::fabs(replayed - measured_ns) / measured_ns);
    replayed_sum += edited / n;
    measured_sum += measured_ns / n;
    fit_sum += replayed / n;
  }
  if (errors.empty()) {
    res.error = "no step was recorded on every rank";
    return res;
  }
  res.ok = true;
  if (fit.forced > 0)
    res.notes.push_back(std::to_string(fit.forced) +
                        " wait(s) for a collective some rank never reached were replayed as measured");
  const double rank_steps = static_cast<double>(errors.size() * data.size());
  res.stage_ms = per_stage_ms(*what_if, rank_steps);
  res.fit_stage_ms = per_stage_ms(fit, rank_steps);
  res.step_ms = ms(replayed_sum / static_cast<double>(errors.size()));
  if (ms(bound_ns) > res.step_ms)  // the cores cannot run the edited work faster than this
    res.step_ms = ms(bound_ns);
  else
    res.saturated.clear();
  res.measured_ms = ms(measured_sum / static_cast<double>(errors.size()));
  res.fit_ms = ms(fit_sum / static_cast<double>(errors.size()));
  res.error_mean = mean(errors);
  res.error_p90 = covering_percentile(errors, 0.9);
  return res;
}

ReplayResult replay(const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                    const std::vector<ReplayEdit>& edits, bool keep_trace, const std::vector<HostCores>& hosts) {
  return RunReplay(data, common, hosts).replay(edits, keep_trace);
}

}  // namespace ddp
