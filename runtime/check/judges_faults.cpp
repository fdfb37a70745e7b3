// faults.exit: an injected fault ends every rank in time, exits 1, names the culprit with its step and stage, and
// leaves what the user keeps of a failed run readable.
#include <algorithm>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "traces/base/text_format.h"
#include "traces/model/stages.h"

namespace ddp {

CheckResult judge_faults(const std::vector<FaultScenario>& scenarios) {
  nlohmann::json d = nlohmann::json::array();
  std::string problem, times;
  for (const auto& s : scenarios) {
    const RunOutcome& o = s.outcome;
    double worst = 0;
    for (const auto& r : o.ranks) worst = std::max(worst, r.ended_after_fault_s);
    double limit = s.kind == "hang" ? 10.0 : 5.0;  // hang: from the last progress
    std::string step_text = "step " + std::to_string(s.step);
    bool named = o.message.find("rank " + std::to_string(s.rank)) != std::string::npos;
    bool has_step = o.message.find(step_text) != std::string::npos;
    bool has_stage = false;
    for (int i = 0; i < kStageCount; ++i)
      has_stage |= o.message.find(std::string(stage_name(static_cast<Stage>(i)))) != std::string::npos;
    has_stage |= o.message.find("startup") != std::string::npos;
    d.push_back({{"kind", s.kind},
                 {"exit_code", o.exit_code},
                 {"culprit", o.culprit},
                 {"message", o.message},
                 {"slowest_exit_after_fault_s", worst},
                 {"limit_s", limit},
                 {"traces_export", s.traces_export}});
    times += (times.empty() ? "" : ", ") + s.kind + " " + fmt("%.2f s", worst);
    if (!problem.empty()) continue;
    if (!s.run_failed.empty())
      problem = s.kind + ": " + s.run_failed;
    else if (o.exit_code != 1)
      problem = s.kind + ": supervisor exited " + std::to_string(o.exit_code) + ", expected 1";
    else if (o.culprit != s.rank || !named)
      problem = s.kind + ": the failing rank " + std::to_string(s.rank) + " was not named (" + o.message + ")";
    else if (!has_step || !has_stage)
      problem = s.kind + ": the message lacks the step or stage (" + o.message + ")";
    else if (worst > limit)
      problem = s.kind + ": a rank took " + fmt("%.2f", worst) + " s to end, limit " + fmt("%.0f", limit) + " s";
    else if (!s.traces_export)
      problem = s.kind + ": traces did not export: " + s.export_error;
  }
  if (!problem.empty()) return check_result(check_id::kFaultsExit, CheckStatus::fail, problem, d);
  return check_result(
      check_id::kFaultsExit, CheckStatus::pass,
      std::to_string(scenarios.size()) +
          " injected faults each ended every rank in time, exit 1, culprit, step and stage named, traces exported (" +
          times + ")",
      d);
}

}  // namespace ddp
