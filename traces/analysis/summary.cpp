#include "traces/analysis/summary.h"

#include <algorithm>
#include <cstdio>

#include "traces/base/stats.h"

namespace ddp {
namespace {
double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double ms(double ns) { return ns / 1e6; }
}  // namespace

std::vector<RankSummary> summarize(const RunTrace& run) {
  std::vector<RankSummary> out;
  for (const RankTrace& r : run.ranks) {
    RankSummary s;
    s.rank = r.rank;
    s.complete = r.complete;
    s.dropped = r.dropped;
    s.events = r.events.size();
    std::vector<double> steps;  // durations, ns
    int64_t step_total_ns = 0;
    for (const Event& e : r.events) {
      if (!e.is_span()) {
        if (e.stage == static_cast<uint8_t>(Counter::host_rss_bytes))
          s.peak_rss_bytes = std::max(s.peak_rss_bytes, e.value);
        continue;
      }
      StageTotals& t = s.stages[e.stage];
      t.count++;
      t.total_ns += e.duration();
      t.bytes += e.value;
      if (e.stage_id() == Stage::step) {
        steps.push_back(static_cast<double>(e.duration()));
        step_total_ns += e.duration();
      }
    }
    s.steps = steps.size();
    s.step_mean_ms = steps.empty() ? 0 : ms(step_total_ns) / static_cast<double>(steps.size());
    // The median of the summary is the nearest-rank 50th percentile (the upper middle of an even count).
    s.step_median_ms = ms(percentile(steps, 0.5));
    s.step_p90_ms = ms(percentile(steps, 0.9));
    out.push_back(s);
  }
  return out;
}

nlohmann::json summary_json(const std::vector<RankSummary>& sums) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& s : sums) {
    nlohmann::json stages = nlohmann::json::object();
    for (int i = 0; i < kStageCount; ++i) {
      const StageTotals& t = s.stages[i];
      if (!t.count) continue;
      stages[std::string(stage_name(static_cast<Stage>(i)))] = {
          {"count", t.count},
          {"total_ms", ms(t.total_ns)},
          {"per_step_ms", s.steps ? ms(t.total_ns) / static_cast<double>(s.steps) : 0.0},
          {"bytes", t.bytes}};
    }
    ranks.push_back({{"rank", s.rank},
                     {"steps", s.steps},
                     {"step_mean_ms", s.step_mean_ms},
                     {"step_median_ms", s.step_median_ms},
                     {"step_p90_ms", s.step_p90_ms},
                     {"stages", stages},
                     {"peak_rss_bytes", s.peak_rss_bytes},
                     {"events", s.events},
                     {"dropped_events", s.dropped},
                     {"complete", s.complete}});
  }
  return {{"ranks", ranks}};
}

std::string summary_text(const std::vector<RankSummary>& sums) {
  std::string out;
  char line[256];
  for (const auto& s : sums) {
    std::snprintf(line, sizeof(line), "rank %u: %llu steps, step mean %.3f ms, median %.3f ms, p90 %.3f ms%s\n", s.rank,
                  static_cast<unsigned long long>(s.steps), s.step_mean_ms, s.step_median_ms, s.step_p90_ms,
                  s.complete ? "" : "  [trace ended early]");
    out += line;
    std::snprintf(line, sizeof(line), "  %-11s %9s %11s %12s %14s\n", "stage", "count", "total ms", "ms/step", "bytes");
    out += line;
    for (int i = 0; i < kStageCount; ++i) {
      const StageTotals& t = s.stages[i];
      if (!t.count) continue;
      std::snprintf(line, sizeof(line), "  %-11s %9llu %11.3f %12.4f %14llu\n",
                    std::string(stage_name(static_cast<Stage>(i))).c_str(), static_cast<unsigned long long>(t.count),
                    ms(t.total_ns), s.steps ? ms(t.total_ns) / static_cast<double>(s.steps) : 0.0,
                    static_cast<unsigned long long>(t.bytes));
      out += line;
    }
    std::snprintf(line, sizeof(line), "  peak host RSS %.1f MiB, %llu events, %llu dropped\n",
                  static_cast<double>(s.peak_rss_bytes) / (1 << 20), static_cast<unsigned long long>(s.events),
                  static_cast<unsigned long long>(s.dropped));
    out += line;
  }
  return out;
}

}  // namespace ddp
