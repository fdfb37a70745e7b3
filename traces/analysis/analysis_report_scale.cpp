// The report at many ranks (analysis_report_scale.h): what is wrong, grouped, in a screen.
#include "traces/analysis/analysis_report_scale.h"

#include <algorithm>
#include <map>
#include <set>

#include "traces/base/rank_set.h"
#include "traces/base/stats.h"
#include "traces/base/text_format.h"

namespace ddp {
namespace {

std::string line(const std::string& text) { return clip(text, kReportLineMax) + "\n"; }

// One pattern: a stage at fault on one rank or several (rank -1: no single rank, its own group per stage).
struct CauseGroup {
  std::vector<const StallCause*> members;  // by time lost, descending
  double lost_ms() const { return members.front()->lost_ms; }
};

std::vector<CauseGroup> group_causes(const std::vector<StallCause>& causes) {
  std::map<std::pair<bool, std::string>, CauseGroup> by;
  for (const StallCause& c : causes) by[{c.rank < 0, c.stage}].members.push_back(&c);
  std::vector<CauseGroup> out;
  for (auto& [key, g] : by) {
    std::sort(g.members.begin(), g.members.end(),
              [](const StallCause* x, const StallCause* y) { return x->lost_ms > y->lost_ms; });
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const CauseGroup& x, const CauseGroup& y) { return x.lost_ms() > y.lost_ms(); });
  return out;
}

std::string victims_summary(const CauseGroup& g, int world) {
  std::map<int, double> ms;  // victim rank -> its worst wait over the group
  std::set<std::string> stages;
  for (const StallCause* c : g.members)
    for (const StallVictim& v : c->victims) {
      ms[v.rank] = std::max(ms[v.rank], v.ms);
      stages.insert(v.stage);
    }
  if (ms.empty()) return "no victim on another rank";
  std::vector<int> ranks;
  std::vector<double> waits;
  auto worst = ms.begin();
  for (auto it = ms.begin(); it != ms.end(); ++it) {
    ranks.push_back(it->first);
    waits.push_back(it->second);
    if (it->second > worst->second) worst = it;
  }
  std::string st;
  for (const std::string& s : stages) st += (st.empty() ? "" : ", ") + s;
  return describe_ranks(ranks, world) + " waited (" + st + "): median " + fmt("%.2f", percentile(waits, 0.5)) +
         " ms, worst rank " + std::to_string(worst->first) + " " + fmt("%.2f", worst->second) + " ms";
}

}  // namespace

std::string causes_text_grouped(const Analysis& a) {
  std::string out = "\ncauses (grouped by stage, ranked by time lost; --json lists every one):\n";
  if (a.causes.empty()) return out + "  none above " + fmt("%.0f%%", 100 * kMinCauseShare) + " of step time\n";
  const std::vector<CauseGroup> groups = group_causes(a.causes);
  for (size_t i = 0; i < groups.size() && i < kCauseGroupsShown; ++i) {
    const CauseGroup& g = groups[i];
    const StallCause& top = *g.members.front();
    std::vector<int> ranks;
    for (const StallCause* c : g.members) ranks.push_back(c->rank);
    const std::string who = top.rank < 0 ? "all ranks" : describe_ranks(ranks, a.world);
    const std::string each = g.members.size() > 1 ? " (the worst; each rank's in --json)" : "";
    out += line(fmt("  %zu. %s %s: %.2f ms lost%s (%.2f ms/step, %.1f%% of step time); worst at step %u, rank %d",
                    i + 1, who.c_str(), top.stage.c_str(), top.lost_ms, each.c_str(), top.lost_ms_per_step,
                    100 * top.share, top.at_step, top.at_rank));
    out += line("     " + std::string(g.members.size() > 1 ? "e.g. " : "") + top.explanation);
    out += line("     victims: " + victims_summary(g, a.world));
  }
  if (groups.size() > kCauseGroupsShown)
    out += fmt("  ... %zu more cause group(s) below these\n", groups.size() - kCauseGroupsShown);
  return out;
}

std::string flags_text_grouped(const Analysis& a) {
  std::string out = "\nflags:\n";
  if (a.flags.empty()) return out + "  none\n";
  std::map<std::string, std::vector<const StallFlag*>> by;
  std::vector<std::string> order;
  for (const StallFlag& f : a.flags) {
    if (!by.count(f.id)) order.push_back(f.id);
    by[f.id].push_back(&f);
  }
  for (size_t i = 0; i < order.size() && i < kFlagGroupsShown; ++i) {
    const auto& fs = by[order[i]];
    std::vector<int> ranks;
    for (const StallFlag* f : fs) ranks.push_back(f->rank);
    out += line("  [" + order[i] + "] " + describe_ranks(ranks, a.world) + (fs.size() > 1 ? "; e.g. " : ": ") +
                fs.front()->message);
  }
  if (order.size() > kFlagGroupsShown) out += fmt("  ... %zu more flag(s)\n", order.size() - kFlagGroupsShown);
  return out;
}

std::string ranks_text_summarised(const Analysis& a) {
  std::string out = fmt("\nranks (%zu; each rank's numbers in --json):\n", a.ranks.size());
  if (a.ranks.empty()) return out;
  auto dist = [&](const char* name, auto get) {
    std::vector<double> v;
    const RankAnalysis* worst = &a.ranks.front();
    for (const RankAnalysis& r : a.ranks) {
      v.push_back(get(r));
      if (get(r) > get(*worst)) worst = &r;
    }
    out += fmt("  %-10s ms/step: min %.3f, median %.3f, p90 %.3f, max %.3f (rank %d)\n", name, percentile(v, 0),
               percentile(v, 0.5), percentile(v, 0.9), percentile(v, 1), worst->rank);
  };
  dist("step", [](const RankAnalysis& r) { return r.step_ms; });
  dist("wait_data", [](const RankAnalysis& r) { return r.wait_data_ms; });
  dist("wait_comm", [](const RankAnalysis& r) { return r.wait_comm_ms; });
  dist("skew", [](const RankAnalysis& r) { return r.skew_ms; });
  // A straggler works longer than its peers: its busy time (the step less what it waited for data and for peers)
  // against the median rank's.
  auto busy = [](const RankAnalysis& r) { return std::max(0.0, r.step_ms - r.wait_data_ms - r.wait_comm_ms); };
  std::vector<double> b;
  for (const RankAnalysis& r : a.ranks) b.push_back(busy(r));
  const double median = percentile(b, 0.5);
  std::vector<const RankAnalysis*> worst;
  for (const RankAnalysis& r : a.ranks) worst.push_back(&r);
  std::sort(worst.begin(), worst.end(), [&](const RankAnalysis* x, const RankAnalysis* y) {
    return busy(*x) != busy(*y) ? busy(*x) > busy(*y) : x->rank < y->rank;
  });
  out += fmt("  stragglers (busy time per step against the median rank's %.3f ms, worst %zu):\n", median,
             std::min(kStragglersShown, worst.size()));
  for (size_t i = 0; i < worst.size() && i < kStragglersShown; ++i) {
    const RankAnalysis& r = *worst[i];
    out += fmt("    rank %-5d %6.2fx  busy %.3f ms, wait_data %.3f ms, wait_comm %.3f ms\n", r.rank,
               median > 0 ? busy(r) / median : 0.0, busy(r), r.wait_data_ms, r.wait_comm_ms);
  }
  return out;
}

std::string gpu_text_summarised(const Analysis& a) {
  if (a.gpu.empty()) return "";
  std::vector<double> idle;
  const GpuTime* worst = &a.gpu.front();
  for (const GpuTime& g : a.gpu) {
    const double share = g.window_ms > 0 ? g.idle_ms / g.window_ms : 0;
    idle.push_back(100 * share);
    if (share > (worst->window_ms > 0 ? worst->idle_ms / worst->window_ms : 0)) worst = &g;
  }
  return fmt(
      "\ngpu (%zu ranks with device records; docs/stalls.md \"GPU time\"): idle share median %.1f%%, p90 %.1f%%, "
      "max %.1f%% (rank %d)\n",
      a.gpu.size(), percentile(idle, 0.5), percentile(idle, 0.9), percentile(idle, 1), worst->rank);
}

std::string problems_text_capped(const Analysis& a) {
  if (a.problems.empty()) return "";
  std::string out = "\nproblems:\n";
  for (size_t i = 0; i < a.problems.size() && i < kProblemsShown; ++i) out += line("  " + a.problems[i]);
  if (a.problems.size() > kProblemsShown) out += fmt("  ... %zu more (--json)\n", a.problems.size() - kProblemsShown);
  return out;
}

}  // namespace ddp
