// memory.steady: each rank's memory per optimizer step after warm-up — CUDA's allocated bytes on a GPU, else the C
// heap in use (glibc's mallinfo2), else the process's resident set. A leak grows step after step (a tensor kept
// with its graph: `running += loss`); a steady job rises during warm-up and then stays flat. The first two count
// what is held, to the byte; the resident set also moves with what allocators keep or return after a free, so it is
// judged only where nothing better was measured, with marks wide enough for that noise.
#include <algorithm>
#include <cmath>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "traces/base/stats.h"
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

LeakMarks marks_for(Measure m) { return m == Measure::rss ? kLeakResident : kLeakHeld; }

// The medians here are by nearest rank (percentile 0.5: of an even count the upper middle), as judges.h's marks were
// measured with.
//
// Bytes per step, Theil-Sen: the median of the slopes between every two steps. A one-time rise (the first
// checkpoint's save, a cache filled once: +285 KB at once on a Trainer's rank 0) moves a least-squares fit by its
// whole size over the window; it moves the median of the pairwise slopes hardly at all, while a leak moves every
// one of them. At most kSlopePoints evenly spaced steps: the pairs grow with their square.
constexpr size_t kSlopePoints = 400;
double slope(const std::vector<double>& y) {
  if (y.size() < 2) return 0;
  const size_t n = std::min(y.size(), kSlopePoints);
  std::vector<size_t> at(n);
  for (size_t k = 0; k < n; ++k) at[k] = k * (y.size() - 1) / (n - 1);
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) slopes.push_back((y[at[b]] - y[at[a]]) / static_cast<double>(at[b] - at[a]));
  return percentile(std::move(slopes), 0.5);
}

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
    const int64_t warm = std::max<int64_t>(e.warmup_steps, static_cast<int64_t>(steps.size() / 10));
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
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Series& s = ranks[r];
    window = std::min(window, s.bytes.size());
    const size_t q = std::max<size_t>(s.bytes.size() / 4, 1);
    const double rise = s.bytes.size() < 2 ? 0
                                           : percentile({s.bytes.end() - q, s.bytes.end()}, 0.5) -
                                                 percentile({s.bytes.begin(), s.bytes.begin() + q}, 0.5);
    d["ranks"].push_back({{"rank", r},
                          {"measure", key(s.measure)},
                          {"leak_bytes_per_step", marks_for(s.measure).per_step},
                          {"leak_bytes", marks_for(s.measure).total},
                          {"peak_bytes", s.peak},
                          {"from_step", s.from_step},
                          {"steps", s.bytes.size()},
                          {"bytes_per_step", slope(s.bytes)},
                          {"rise_bytes", rise},
                          {"median_bytes", percentile(s.bytes, 0.5)}});
  }
  if (ranks.empty() || window < kMemoryMinSteps)
    return check_result(id, CheckStatus::warn,
                        "only " + std::to_string(ranks.empty() ? 0 : window) +
                            " optimizer steps after warm-up: too few to tell growth from warm-up (needs " +
                            std::to_string(kMemoryMinSteps) + ")",
                        d);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& j = d["ranks"][r];
    const double per_step = j["bytes_per_step"], rise = j["rise_bytes"];
    const LeakMarks marks = marks_for(ranks[r].measure);
    if (per_step >= marks.per_step && rise >= marks.total)
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
