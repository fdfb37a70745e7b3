#include "traces/rank_data/cpu_use.h"

namespace ddp::rank_data {

void CpuTime::add(const Span& s, const SpanSplit& c) {
  wall_ns += static_cast<double>(s.dur());
  cpu_ns += 1000.0 * c.cpu_us;
  if (c.wait_known())
    wait_ns += 1000.0 * c.wait_us;
  else
    ++waits_unknown;
  ++spans;
}

void CpuTime::add(const CpuTime& o) {
  wall_ns += o.wall_ns;
  cpu_ns += o.cpu_ns;
  wait_ns += o.wait_ns;
  spans += o.spans;
  waits_unknown += o.waits_unknown;
}

RankCpuUse cpu_use(const RankData& d) {
  RankCpuUse u;
  u.rank = d.rank;
  auto sum = [&](const std::vector<Span>& spans, const std::vector<SpanSplit>& splits, std::map<Stage, CpuTime>& to) {
    for (size_t i = 0; i < splits.size() && i < spans.size(); ++i)
      if (splits[i].known() && d.in(spans[i].step)) to[spans[i].stage].add(spans[i], splits[i]);
  };
  sum(d.main, d.main_cpu, u.main);
  sum(d.loader, d.loader_cpu, u.loader);
  for (const auto* stages : {&u.main, &u.loader})
    for (const auto& [stage, t] : *stages) u.all.add(t);
  return u;
}

}  // namespace ddp::rank_data
