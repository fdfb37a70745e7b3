#pragma once
// Stall analysis, step 3: cross-rank root cause. Every stall instance (a wait_data or wait_comm span in the steps
// every rank analysed) is split into pieces charged to causes (rank, stage); the pieces are summed into StallCauses,
// ranked by the job time they cost. docs/stalls.md, "Attribution rules", is the specification.
// Internal to traces/analysis*.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/analysis/analysis_types.h"
#include "traces/rank_data/rank_data.h"

namespace ddp::analysis_detail {

using namespace rank_data;  // the analysis reads the ranks as traces/rank_data prepared them

// What a cause is charged to: a stage; `other`, main-thread time outside every span (no stage); or the cores of a
// saturated host (cpu_verdict.h), waits no stage would have with the cores it needs.
struct CauseStage {
  std::optional<Stage> stage;
  bool cores = false;
  CauseStage() = default;
  CauseStage(Stage s) : stage(s) {}  // NOLINT: a stage is a cause stage
  CauseStage(std::nullopt_t) {}      // NOLINT: `other`
  static CauseStage saturated_cores() {
    CauseStage c;
    c.cores = true;
    return c;
  }
  explicit operator bool() const { return stage.has_value(); }
  Stage operator*() const { return *stage; }
  bool operator==(Stage s) const { return stage == s; }
};
// The name a cause's stage is reported by: the stage's, kUntrackedCauseName or kCoresCauseName.
inline constexpr const char* kCoresCauseName = "cpu";
inline std::string cause_stage_name(const CauseStage& s) {
  return s.cores ? kCoresCauseName : s ? sname(*s) : std::string(kUntrackedCauseName);
}

// `ranks[i]` measures `data[i]`; `common` are the steps every rank analysed; `step_ms` the mean step over ranks;
// `origin_ns` the run's time origin (StallCause::at_ns is relative to it); `hosts` the cores' verdict. Causes under
// kMinCauseShare are dropped.
std::vector<StallCause> attribute_stalls(const std::vector<RankData>& data, const std::vector<RankAnalysis>& ranks,
                                         const std::vector<uint32_t>& common, double step_ms, int64_t origin_ns,
                                         const std::vector<HostCpu>& hosts);

// Fills a cause's evidence and explanation from the per-rank measures.
void explain(StallCause& c, const CauseStage& stage, const std::vector<RankAnalysis>& ranks,
             const std::vector<HostCpu>& hosts);

}  // namespace ddp::analysis_detail
