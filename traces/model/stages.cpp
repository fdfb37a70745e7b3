#include "traces/model/stages.h"

namespace ddp {

std::optional<Stage> stage_from_name(std::string_view name) {
  for (int i = 0; i < kStageCount; ++i)
    if (stage_table::kStages[i].name == name) return static_cast<Stage>(i);
  return std::nullopt;
}

std::optional<Counter> counter_from_name(std::string_view name) {
  for (int i = 0; i < kCounterCount; ++i)
    if (stage_table::kCounters[i] == name) return static_cast<Counter>(i);
  return std::nullopt;
}

std::string stage_names_with(StageFlag f) {
  std::string out;
  for (int i = 0; i < kStageCount; ++i) {
    const Stage s = static_cast<Stage>(i);
    if (!stage_has(s, f)) continue;
    if (!out.empty()) out += ", ";
    out += stage_name(s);
  }
  return out;
}

}  // namespace ddp
