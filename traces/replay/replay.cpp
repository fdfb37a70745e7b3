// The replay of replay.h: the measured and the edited plan run (replay_run.h), their steps against the measured; the
// predicted run as traces.
#include "traces/replay/replay.h"

#include <algorithm>
#include <cmath>

#include "traces/base/stats.h"
#include "traces/base/text_format.h"
#include "traces/replay/contention.h"
#include "traces/replay/replay_graph.h"
#include "traces/replay/replay_run.h"

namespace ddp {
namespace {

using namespace replay_graph;

// The replayed timeline of each rank as a trace (ReplayResult::predicted).
std::vector<RankTrace> as_traces(const std::vector<RankData>& data, const std::vector<Chain>& chains, const Plan& p,
                                 const Timeline& tl, int world) {
  std::vector<RankTrace> out;
  for (size_t r = 0; r < chains.size(); ++r) {
    const Chain& c = chains[r];
    RankTrace t;
    t.rank = static_cast<uint32_t>(data[r].rank);
    t.world = static_cast<uint32_t>(world);
    t.complete = true;
    t.lanes = {"main", "comm"};
    if (data[r].trace && data[r].trace->meta.count("host")) t.meta["host"] = data[r].trace->meta.at("host");
    auto span = [&](Stage s, uint8_t lane, int64_t a, int64_t b, uint32_t step, uint8_t micro) -> Event& {
      t.events.push_back(make_span(s, lane, a, std::max(a, b)));
      t.events.back().step = step;
      t.events.back().micro = micro;
      return t.events.back();
    };
    int64_t step_begin = 0;
    for (size_t i = 0; i < c.ops.size(); ++i) {
      const Op& o = c.ops[i];
      const auto [a, b] = tl.ops[r][i];
      if (o.kind == OpKind::step_begin) step_begin = a;
      if (o.kind == OpKind::step_end) span(Stage::step, 0, step_begin, a, o.step, 0);
      if (o.kind == OpKind::step_begin || o.kind == OpKind::step_end || o.other || b <= a) continue;
      span(o.stage, 0, a, b, o.step, o.micro);
    }
    for (size_t li = 0; li < p.launches[r].size(); ++li) {
      const Launch& l = p.launches[r][li];
      const auto [a, b] = tl.buckets[r][li];
      if (b < a) continue;  // its sync was never waited for (a trace cut short)
      Event& e = span(Stage::allreduce, 1, a, b, static_cast<uint32_t>(l.key >> 24), static_cast<uint8_t>(l.key >> 16));
      e.bucket = static_cast<uint16_t>(l.key & 0xFFFF);
      e.value = l.bytes;
    }
    // Each batch on the worker that made it: a worker's batches follow each other (Plan::prev), a batch with none
    // before it starts a worker of its own.
    std::vector<int> worker(c.batches.size(), -1);
    int workers = 0;
    const Stage order[] = {Stage::disk_read, Stage::transform, Stage::collate, Stage::pin};
    for (size_t bi = 0; bi < c.batches.size(); ++bi) {
      const Batch& b = c.batches[bi];
      const Op& o = c.ops[b.op];
      const int64_t prev = p.prev[r][bi];
      worker[bi] = prev >= 0 ? worker[static_cast<size_t>(prev)] : workers++;
      uint8_t lane = 0;
      if (p.waits_for[r][bi]) {
        const std::string name = "loader/" + std::to_string(worker[bi]);
        auto at = std::find(t.lanes.begin(), t.lanes.end(), name);
        if (at == t.lanes.end() && t.lanes.size() < 255) at = t.lanes.insert(t.lanes.end(), name);
        lane = at == t.lanes.end() ? 0 : static_cast<uint8_t>(at - t.lanes.begin());  // past 253 workers: main's
      }
      const auto [a, z] = tl.fetches[r][bi];
      const double measured = static_cast<double>(spent(b));
      const double scale = measured > 0 ? static_cast<double>(z - a) / measured : 0;
      int64_t cursor = a;
      for (Stage s : order) {
        auto it = b.stages.find(s);
        if (it == b.stages.end()) continue;
        const int64_t end = cursor + std::llround(static_cast<double>(it->second) * scale);
        Event& e = span(s, lane, cursor, end, o.step, o.micro);
        e.item = static_cast<uint32_t>(bi);
        e.epoch = b.pass;
        cursor = end;
      }
    }
    std::stable_sort(t.events.begin(), t.events.end(), [](const Event& x, const Event& y) { return x.t0 < y.t0; });
    out.push_back(std::move(t));
  }
  return out;
}

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

ReplayResult replay(const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                    const std::vector<ReplayEdit>& edits, bool keep_trace, const std::vector<HostCores>& hosts) {
  ReplayResult res;
  if (data.empty() || common.empty()) {
    res.error = "no steps in common to replay";
    return res;
  }
  const std::vector<Chain> chains = build_chains(data, common);
  const Plan measured = measured_plan(chains);
  const CommModel model = fit_comm(measured);
  const int world =
      std::max(static_cast<int>(data.size()), data.front().trace ? static_cast<int>(data.front().trace->world) : 0);
  res.comm_fixed_ms = ms(model.fixed_ns);
  res.comm_bus_bytes_per_s = model.ns_per_byte > 0 ? ring_factor(world) * 1e9 / model.ns_per_byte : 0;
  const Timeline fit = run(chains, measured);
  Timeline what_if = fit;
  for (const HostCores& h : hosts) res.stretch_measured.push_back(measured_load(h, chains).stretch());
  res.stretch_after = res.stretch_measured;
  HostBound bound;
  if (!edits.empty()) {
    std::vector<Chain> edited_chains = chains;
    for (const ReplayEdit& e : edits)
      if (e.kind == ReplayEdit::Kind::accumulate && e.value > 1)
        res.error = accumulate(edited_chains, static_cast<int>(e.value));
    if (!res.error.empty()) return res;
    Plan edited = measured_plan(edited_chains);
    res.error = edit_plan(edited, edited_chains, edits, model, world);
    if (!res.error.empty()) return res;
    const double cores = edited_cores(edits);
    if (cores > 0 && hosts.empty()) {
      res.error =
          "cores=N needs the ranks' cores and their spans' waits for one: a run recorded by this version (its "
          "manifest's ranks[].cpu and each span's CPU split)";
      return res;
    }
    res.stretch_after = apply_contention(edited, edited_chains, chains, hosts, cores);
    what_if = run(edited_chains, edited);
    bound = host_bound(hosts, edited_chains, edited, static_cast<double>(common.size()), cores);
    if (keep_trace) res.predicted = as_traces(data, edited_chains, edited, what_if, world);
  } else if (keep_trace) {
    res.predicted = as_traces(data, chains, measured, fit, world);
  }
  std::vector<double> errors;
  double replayed_sum = 0, measured_sum = 0, fit_sum = 0;
  for (uint32_t s : common) {
    double measured_ns = 0, replayed = 0, edited = 0;
    int n = 0;
    for (size_t r = 0; r < data.size(); ++r) {
      auto iv = data[r].steps.find(s);
      auto f = fit.steps[r].find(s);
      auto w = what_if.steps[r].find(s);
      if (iv == data[r].steps.end() || f == fit.steps[r].end() || w == what_if.steps[r].end()) continue;
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
  res.stage_ms = per_stage_ms(what_if, rank_steps);
  res.fit_stage_ms = per_stage_ms(fit, rank_steps);
  res.step_ms = ms(replayed_sum / static_cast<double>(errors.size()));
  if (ms(bound.ns) > res.step_ms) {  // the cores cannot run the edited work faster than this
    res.step_ms = ms(bound.ns);
    res.saturated = bound.why;
  }
  res.measured_ms = ms(measured_sum / static_cast<double>(errors.size()));
  res.fit_ms = ms(fit_sum / static_cast<double>(errors.size()));
  res.error_mean = mean(errors);
  res.error_p90 = covering_percentile(errors, 0.9);
  return res;
}

}  // namespace ddp
