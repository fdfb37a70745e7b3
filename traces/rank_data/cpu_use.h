#pragma once
// Where a rank's threads spent its analysed steps, by stage: on a CPU, runnable and waiting for a core, or blocked
// (traces/model/span_cpu.h), summed over the spans that carry a split. The analysis' CPU verdict and the replay's
// contention model read it (traces/analysis/cpu_verdict.h, traces/replay/contention.h).
#include <cstdint>
#include <map>

#include "traces/rank_data/rank_data.h"

namespace ddp::rank_data {

struct CpuTime {
  double wall_ns = 0, cpu_ns = 0, wait_ns = 0;  // wait_ns: of the spans whose wait is known
  uint64_t spans = 0;
  uint64_t waits_unknown = 0;  // spans whose kernel said no wait (no schedstat): their wait counts as blocked
  double blocked_ns() const { return wall_ns > cpu_ns + wait_ns ? wall_ns - cpu_ns - wait_ns : 0; }
  // The time a unit of CPU work waited for a core: the stretch processor sharing puts on it.
  double stretch() const { return cpu_ns > 0 ? wait_ns / cpu_ns : 0; }
  void add(const Span& s, const SpanSplit& c);
  void add(const CpuTime& o);
};

struct RankCpuUse {
  int rank = 0;
  std::map<Stage, CpuTime> main;    // the training thread's stages
  std::map<Stage, CpuTime> loader;  // the loader's stages: its workers', or the training thread's when it loads
  CpuTime all;                      // both
  bool recorded() const { return all.spans > 0; }
};

// Over the rank's analysed steps; empty (recorded() false) when its trace carries no split.
RankCpuUse cpu_use(const RankData& d);

}  // namespace ddp::rank_data
