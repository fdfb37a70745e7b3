// memory.steady: each rank's memory per optimizer step after warm-up — CUDA's allocated bytes on a GPU, else the C
// heap in use (glibc's mallinfo2), else the process's resident set. A leak grows step after step (a tensor kept
// with its graph: `running += loss`); a steady job rises during warm-up and then stays flat. The first two count
// what is held, to the byte; the resident set also moves with what allocators keep or return after a free, so it is
// judged only where nothing better was measured, with marks wide enough for that noise. The rule and its marks:
// traces/analysis/memory_growth.h, one rule with the analysis' memory_growth flag.
#include <algorithm>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "traces/analysis/memory_growth.h"
#include "traces/base/text_format.h"

namespace ddp {
namespace {

enum class Measure { cuda_allocated, heap, rss };

struct Series {
  std::vector<double> bytes;  // per step after warm-up
  int64_t from_step = 0;
  Measure measure = Measure::rss;
  double peak = 0;
};

const char* key(Measure m) {
  return m == Measure::cuda_allocated ? "cuda_allocated" : m == Measure::heap ? "heap" : "rss";
}
const char* said(Measure m) {
  return m == Measure::cuda_allocated ? "CUDA allocated" : m == Measure::heap ? "heap in use" : "resident";
}

// The best measure every step of a rank has.
Measure measure_of(const std::vector<TrainingStep>& steps) {
  if (!steps.empty() && steps.back().cuda_allocated >= 0) return Measure::cuda_allocated;
  const bool heap = !steps.empty() && std::all_of(steps.begin(), steps.end(), [](const TrainingStep& t) {
    return t.heap.has_value() && *t.heap > 0;
  });
  return heap ? Measure::heap : Measure::rss;
}

double bytes_of(const TrainingStep& t, Measure m) {
  return static_cast<double>(m == Measure::cuda_allocated ? t.cuda_allocated : m == Measure::heap ? *t.heap : t.rss);
}

// memory_growth.h's rule, with the marks of what was measured: the resident set's are wider.
const GrowthRule& rule_for(Measure m) { return m == Measure::rss ? kLeakResident : kLeakHeld; }

std::string mb(double bytes) { return fmt("%.1f MB", bytes / 1e6); }

}  // namespace

CheckResult judge_memory(const TrainingEvidence& e) {
  const char* id = check_id::kMemory;
  if (!e.failure.empty()) return check_result(id, CheckStatus::fail, e.failure);
  std::vector<Series> ranks;
  for (const auto& steps : e.per_rank) {
    Series s;
    s.measure = measure_of(steps);
    // Warm-up: the verified steps (rank 0 builds a reference beside the job) and the first tenth of the run.
    const int64_t warm = std::max<int64_t>(e.warmup_steps, static_cast<int64_t>(steps.size()) / kMemoryWarmupParts);
    for (const TrainingStep& t : steps) {
      const double b = bytes_of(t, s.measure);
      s.peak = std::max(s.peak, b);
      if (t.step < warm || b <= 0) continue;
      if (s.bytes.empty()) s.from_step = t.step;
      s.bytes.push_back(b);
    }
    ranks.push_back(std::move(s));
  }
  nlohmann::json d = {{"ranks", nlohmann::json::array()}};
  size_t window = SIZE_MAX;
  std::vector<MemoryGrowth> growth;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Series& s = ranks[r];
    window = std::min(window, s.bytes.size());
    const GrowthRule& rule = rule_for(s.measure);
    growth.push_back(memory_growth(s.bytes, rule));
    d["ranks"].push_back({{"rank", r},
                          {"measure", key(s.measure)},
                          {"leak_bytes_per_step", rule.per_sample},
                          {"leak_bytes", rule.rise},
                          {"peak_bytes", s.peak},
                          {"from_step", s.from_step},
                          {"steps", s.bytes.size()},
                          {"bytes_per_step", growth.back().per_sample},
                          {"rise_bytes", growth.back().rise},
                          {"median_bytes", growth.back().median}});
  }
  if (ranks.empty() || window < kMemoryMinSteps)
    return check_result(id, CheckStatus::warn,
                        "only " + std::to_string(ranks.empty() ? 0 : window) +
                            " optimizer steps after warm-up: too few to tell growth from warm-up (needs " +
                            std::to_string(kMemoryMinSteps) + ")",
                        d);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double per_step = growth[r].per_sample;
    if (growth[r].grows)
      return check_result(id, CheckStatus::fail,
                          "rank " + std::to_string(r) + " grows " + fmt("%.0f KB", per_step / 1e3) +
                              " per step from step " + std::to_string(ranks[r].from_step) + " (" +
                              said(ranks[r].measure) + " +" +
                              mb(per_step * static_cast<double>(ranks[r].bytes.size() - 1)) + " over " +
                              std::to_string(ranks[r].bytes.size()) +
                              " steps): tensors kept with their graphs? (e.g. `total += loss` instead of "
                              "loss.item())",
                          d);
  }
  std::vector<double> medians;
  for (const auto& j : d["ranks"]) medians.push_back(j["median_bytes"]);
  const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
  std::string peaks;
  for (size_t r = 0; r < ranks.size(); ++r) peaks += (r ? ", " : "") + mb(ranks[r].peak);
  const std::string what = said(ranks.front().measure);
  if (*hi > kRanksApartRatio * *lo && *hi - *lo > kRanksApartBytes)
    return check_result(id, CheckStatus::warn,
                        "ranks far apart: rank " + std::to_string(hi - medians.begin()) + " holds " + mb(*hi) +
                            ", rank " + std::to_string(lo - medians.begin()) + " " + mb(*lo) + " (" + what +
                            "): uneven work or data per rank?",
                        d);
  return check_result(id, CheckStatus::pass,
                      "no growth after warm-up on any rank (" + what + ", " + std::to_string(window) +
                          " steps from step " + std::to_string(ranks.front().from_step) + "); peak per rank " + peaks,
                      d);
}

}  // namespace ddp
