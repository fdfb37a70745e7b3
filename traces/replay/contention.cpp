// The cores' share in the replay (contention.h).
#include "traces/replay/contention.h"

#include <algorithm>
#include <map>
#include <set>

namespace ddp {

std::vector<HostCores> host_cores(const RunTrace& run, const std::vector<rank_data::RankData>& data) {
  std::vector<HostCores> out;
  if (!run.manifest || !run.manifest->fields.ranks) return out;
  struct Seen {
    HostCores h;
    std::set<int64_t> cpus;
    double limit = 0;  // the least cgroup limit or online count among its ranks (0: none yet)
  };
  std::map<std::string, Seen> by_host;
  for (size_t i = 0; i < data.size(); ++i)
    for (const records::manifest_rank& m : *run.manifest->fields.ranks) {
      if (m.rank != data[i].rank || !m.cpu) continue;
      Seen& s = by_host[m.host];
      s.h.host = m.host;
      s.h.ranks.push_back(static_cast<int>(i));
      s.cpus.insert(m.cpu->cpus_allowed.begin(), m.cpu->cpus_allowed.end());
      for (double limit : {m.cpu->cgroup_cores.value_or(0.0), static_cast<double>(m.cpu->cores_online)})
        if (limit > 0) s.limit = s.limit > 0 ? std::min(s.limit, limit) : limit;
    }
  for (auto& [host, s] : by_host) {
    s.h.cores = static_cast<double>(s.cpus.size());
    if (s.limit > 0) s.h.cores = s.h.cores > 0 ? std::min(s.h.cores, s.limit) : s.limit;
    if (s.h.cores > 0) out.push_back(std::move(s.h));
  }
  return out;
}

namespace replay_graph {
namespace {

// An op's or a fetch's parts at duration `d` (its measured parts scaled to it): runnable (on a CPU or waiting) and
// its wait; 0 when it carries no split.
struct Parts {
  double cpu = 0, wait = 0;
};
Parts parts_at(int64_t cpu, int64_t wait, int64_t measured, int64_t d) {
  if (cpu < 0 || measured <= 0) return {};
  const double scale = static_cast<double>(d) / static_cast<double>(measured);
  return {static_cast<double>(cpu) * scale, static_cast<double>(std::max<int64_t>(wait, 0)) * scale};
}

// One rank's ops and fetches under plan `p`, its ops made a step at a time: their parts added to `sum` (in the order
// the host's sum takes them: the ops, then the fetches), its window (its first op's start to its last op's end) and
// its steps.
struct RankSpan {
  int64_t window = 0;
  double steps = 0;
};
RankSpan add_rank_parts(const Chain& c, const Plan& p, size_t r, Parts& sum) {
  RankSpan out;
  OpStream ops(c);
  size_t batch = 0;  // the first batch whose op is not behind
  bool first = true;
  int64_t t0 = 0, t1 = 0;
  while (ops.next())
    for (size_t j = 0; j < ops.ops().size(); ++j) {
      const Op& o = ops.ops()[j];
      const size_t i = ops.first() + j;
      while (batch < c.batches.size() && c.batches[batch].op < i) ++batch;
      const int64_t taken = batch < c.batches.size() && c.batches[batch].op == i ? static_cast<int64_t>(batch) : -1;
      const Parts q = parts_at(o.cpu, o.wait, o.dur(), planned_dur(p, r, o, taken));
      sum.cpu += q.cpu, sum.wait += q.wait;
      if (first) t0 = o.t0, first = false;
      t1 = o.t1;
      out.steps += o.kind == OpKind::step_end;
    }
  out.window = first ? 0 : t1 - t0;
  for (size_t i = 0; i < c.batches.size(); ++i) {
    const Batch& b = c.batches[i];
    const Parts q = parts_at(b.cpu, b.wait, spent(b), p.fetch[r][i]);
    sum.cpu += q.cpu, sum.wait += q.wait;
  }
  return out;
}

// The host's CPU and waits as `p` (a plan of `cs`) has them.
Parts host_parts(const HostCores& h, const Plan& p, const std::vector<Chain>& cs) {
  Parts sum;
  for (int r : h.ranks) add_rank_parts(cs[static_cast<size_t>(r)], p, static_cast<size_t>(r), sum);
  return sum;
}

}  // namespace

int64_t rewaited(const Rewait& w, int64_t cpu, int64_t wait, int64_t measured, int64_t d) {
  // In proportion to what it waited, or (a host that waited for no core) its CPU time times the stretch.
  const Parts q = parts_at(cpu, wait, measured, d);
  const double now = w.measured > 0 ? q.wait * (w.after / w.measured) : q.cpu * w.after;
  return d + static_cast<int64_t>(now - q.wait);
}

double HostLoad::runnable() const {
  if (stretch() > 0) return cores * (1 + stretch());
  return window_ns > 0 ? (cpu_ns + wait_ns) / window_ns : 0;
}

HostLoad measured_load(const HostCores& h, const std::vector<Chain>& cs, const Plan& measured) {
  HostLoad l;
  l.cores = h.cores;
  Parts sum;
  for (int r : h.ranks) {
    const RankSpan q = add_rank_parts(cs[static_cast<size_t>(r)], measured, static_cast<size_t>(r), sum);
    l.window_ns = std::max(l.window_ns, static_cast<double>(q.window));
    l.steps = std::max(l.steps, q.steps);
  }
  l.cpu_ns = sum.cpu;
  l.wait_ns = sum.wait;
  return l;
}

std::vector<double> apply_contention(Plan& edited, const std::vector<Chain>& edited_chains,
                                     const std::vector<HostLoad>& measured, const std::vector<HostCores>& hosts,
                                     double cores) {
  std::vector<double> stretches;
  const std::vector<Chain>& cs = edited_chains;
  edited.rewait.assign(cs.size(), Rewait{});
  for (size_t hi = 0; hi < hosts.size(); ++hi) {
    const HostCores& h = hosts[hi];
    const HostLoad& before = measured[hi];
    const double c = before.stretch(), m = cores > 0 ? cores : h.cores;
    stretches.push_back(c);
    if (before.window_ns <= 0 || h.cores <= 0) continue;
    // The host's runnable threads (N = M (1 + c)) less the runnable time the edits removed over the window (more if
    // they added work: more threads runnable), on its cores as edited: the stretch they leave, N / M - 1.
    const Parts e = host_parts(h, edited, cs);
    const double removed = (before.cpu_ns + before.wait_ns) - (e.cpu + e.wait);
    const double after = std::max(0.0, (before.runnable() - removed / before.window_ns) / m - 1);
    stretches.back() = after;
    if (after == c) continue;
    // Each span's wait as the new stretch makes it: in proportion to what it waited, or (a host that waited for no
    // core) its CPU time times the stretch.
    const Rewait w{true, c, after};
    for (int r : h.ranks) {
      const Chain& ch = cs[static_cast<size_t>(r)];
      edited.rewait[static_cast<size_t>(r)] = w;
      for (size_t i = 0; i < ch.batches.size(); ++i) {
        const Batch& b = ch.batches[i];
        edited.fetch[r][i] = rewaited(w, b.cpu, b.wait, spent(b), edited.fetch[r][i]);
      }
    }
  }
  return stretches;
}

double cpu_bound_step_ns(const HostCores& h, const Plan& p, const std::vector<Chain>& cs, double steps, double cores) {
  const double m = cores > 0 ? cores : h.cores;
  if (steps <= 0 || m <= 0) return 0;
  return host_parts(h, p, cs).cpu / steps / m;
}

}  // namespace replay_graph
}  // namespace ddp
