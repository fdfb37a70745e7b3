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

int64_t window_of(const Chain& c) { return c.ops.empty() ? 0 : c.ops.back().t1 - c.ops.front().t0; }

// The host's CPU and waits as `p` (a plan of `cs`) has them.
Parts host_parts(const HostCores& h, const Plan& p, const std::vector<Chain>& cs) {
  Parts sum;
  for (int r : h.ranks) {
    const Chain& c = cs[static_cast<size_t>(r)];
    for (size_t i = 0; i < c.ops.size(); ++i) {
      const Parts q = parts_at(c.ops[i].cpu, c.ops[i].wait, c.ops[i].dur(), p.dur[r][i]);
      sum.cpu += q.cpu, sum.wait += q.wait;
    }
    for (size_t i = 0; i < c.batches.size(); ++i) {
      const Batch& b = c.batches[i];
      const Parts q = parts_at(b.cpu, b.wait, spent(b), p.fetch[r][i]);
      sum.cpu += q.cpu, sum.wait += q.wait;
    }
  }
  return sum;
}

}  // namespace

double HostLoad::runnable() const {
  if (stretch() > 0) return cores * (1 + stretch());
  return window_ns > 0 ? (cpu_ns + wait_ns) / window_ns : 0;
}

HostLoad measured_load(const HostCores& h, const std::vector<Chain>& cs) {
  HostLoad l;
  l.cores = h.cores;
  const Plan measured = measured_plan(cs);
  const Parts p = host_parts(h, measured, cs);
  l.cpu_ns = p.cpu;
  l.wait_ns = p.wait;
  for (int r : h.ranks) {
    const Chain& c = cs[static_cast<size_t>(r)];
    l.window_ns = std::max(l.window_ns, static_cast<double>(window_of(c)));
    double steps = 0;
    for (const Op& o : c.ops) steps += o.kind == OpKind::step_end;
    l.steps = std::max(l.steps, steps);
  }
  return l;
}

std::vector<double> apply_contention(Plan& edited, const std::vector<Chain>& edited_chains,
                                     const std::vector<Chain>& measured, const std::vector<HostCores>& hosts,
                                     double cores) {
  std::vector<double> stretches;
  const std::vector<Chain>& cs = edited_chains;
  for (const HostCores& h : hosts) {
    const HostLoad before = measured_load(h, measured);
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
    auto rewait = [&](const Parts& q) { return c > 0 ? q.wait * (after / c) : q.cpu * after; };
    for (int r : h.ranks) {
      const Chain& ch = cs[static_cast<size_t>(r)];
      for (size_t i = 0; i < ch.ops.size(); ++i) {
        const Parts q = parts_at(ch.ops[i].cpu, ch.ops[i].wait, ch.ops[i].dur(), edited.dur[r][i]);
        edited.dur[r][i] += static_cast<int64_t>(rewait(q) - q.wait);
      }
      for (size_t i = 0; i < ch.batches.size(); ++i) {
        const Batch& b = ch.batches[i];
        const Parts q = parts_at(b.cpu, b.wait, spent(b), edited.fetch[r][i]);
        edited.fetch[r][i] += static_cast<int64_t>(rewait(q) - q.wait);
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
