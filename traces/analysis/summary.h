#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/run_folder.h"

namespace ddp {

struct StageTotals {
  uint64_t count = 0;
  int64_t total_ns = 0;
  uint64_t bytes = 0;
};

struct RankSummary {
  uint32_t rank = 0;
  uint64_t steps = 0;
  double step_mean_ms = 0;
  double step_median_ms = 0;
  double step_p90_ms = 0;
  std::array<StageTotals, kStageCount> stages{};
  uint64_t peak_rss_bytes = 0;
  uint64_t events = 0;
  uint64_t dropped = 0;
  bool complete = false;
};

std::vector<RankSummary> summarize(const RunTrace& run);
nlohmann::json summary_json(const std::vector<RankSummary>& s);
std::string summary_text(const std::vector<RankSummary>& s);

}  // namespace ddp
