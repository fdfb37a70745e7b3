// A rank's untracked main-thread time named by the profiler's operators in it (analysis.h name_untracked_operators).
#include <algorithm>
#include <string>
#include <vector>

#include "traces/analysis/analysis.h"
#include "traces/base/text_format.h"

namespace ddp {
namespace {

constexpr size_t kOperatorsSaid = 3;     // in the sentence: what a reader acts on
constexpr size_t kOperatorsListed = 10;  // in the evidence

}  // namespace

void name_untracked_operators(Analysis& a, int rank, const std::vector<UntrackedOperator>& ops, uint32_t steps,
                              const std::string& trace) {
  for (StallCause& c : a.causes) {
    if (c.rank != rank || c.stage != kUntrackedCauseName) continue;
    nlohmann::json listed = nlohmann::json::array();
    for (size_t i = 0; i < std::min(ops.size(), kOperatorsListed); ++i)
      listed.push_back(
          {{"name", ops[i].name}, {"ms_per_step", ops[i].ms_per_step}, {"calls_per_step", ops[i].calls_per_step}});
    double total = 0;
    for (const UntrackedOperator& o : ops) total += o.ms_per_step;
    c.evidence["operators"] = listed;
    c.evidence["operators_ms_per_step"] = total;
    c.evidence["operators_trace"] = trace;
    c.evidence["operators_steps"] = steps;
    if (ops.empty()) {
      c.explanation +=
          fmt("; in %s's %u steps the profiler recorded no operator in it: Python code between "
              "operators, or waiting",
              trace.c_str(), steps);
      continue;
    }
    std::string said;
    for (size_t i = 0; i < std::min(ops.size(), kOperatorsSaid); ++i)
      said += fmt("%s%s %.2f", i ? ", " : "", ops[i].name.c_str(), ops[i].ms_per_step);
    c.explanation += fmt("; in %s's %u steps the profiler's operators take %.2f ms/step of it: %s", trace.c_str(),
                         steps, total, said.c_str());
  }
}

}  // namespace ddp
