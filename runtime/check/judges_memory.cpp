// memory.steady: each rank's memory per optimizer step after warm-up — CUDA's allocated bytes on a GPU, else the C
// heap in use (glibc's mallinfo2), else the process's resident set. A leak grows step after step (a tensor kept
// with its graph: `running += loss`); a steady job rises during warm-up and then stays flat. The first two count
// what is held, to the byte; the resident set also moves with what allocators keep or return after a free, so it is
// judged only where nothing better was measured, with marks wide enough for that noise. The rule and its marks:
// traces/analysis/memory_growth.h, one rule with the analysis' memory_growth flag.
//
// On a user's script the companion also counts what leaks are made of, the live tensors (tensor_growth.h): growing
// tensors fail (a graph kept alive always; detached tensors when they outlive an epoch, else a warning, since a
// list filled during an epoch and released at its end is how metrics are gathered), and bytes that grow while the
// tensors do not are a warning with the size and where the rate leads: memory outside tensors is no wrong result.
#include <algorithm>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "runtime/check/tensor_growth.h"
#include "traces/analysis/memory_growth.h"
#include "traces/base/text_format.h"

namespace ddp {
namespace {

enum class Measure { cuda_allocated, heap, rss };

struct Series {
  std::vector<double> bytes;  // per step after warm-up
  int64_t warm = 0;           // steps before this one are warm-up
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

// Where a rate leads: a run is judged on a few dozen steps, a job runs for many thousand.
constexpr double kProjectionSteps = 10000;
std::string projected(double per_step) {
  return "at this rate +" + mb(per_step * kProjectionSteps) + " over 10 000 steps";
}

std::string held_by(const TensorGrowth& g) {
  std::string where = g.holder_name.empty() ? "" : " at " + g.holder_name;
  if (g.holder_kind == "graph")
    return ", the largest graph held" + where + " (" + std::to_string(g.holder_from) + " -> " +
           std::to_string(g.holder_to) + " nodes)";
  if (g.holder_kind.empty()) return "";
  return ", held in a " + g.holder_kind + where + " (" + std::to_string(g.holder_from) + " -> " +
         std::to_string(g.holder_to) + " tensors)";
}

// The verdict on a rank whose live tensors grow.
CheckResult tensors_grow(const char* id, size_t rank, const TensorGrowth& g, const nlohmann::json& d) {
  const double steps = static_cast<double>(std::max<int64_t>(1, g.to_step - g.from_step));
  const double bytes_per_step = static_cast<double>(g.last.tensor_bytes - g.first.tensor_bytes) / steps;
  const std::string span = " from step " + std::to_string(g.from_step) + " to " + std::to_string(g.to_step) + " (" +
                           std::to_string(g.censuses) + " censuses; live tensors " + std::to_string(g.first.tensors) +
                           " -> " + std::to_string(g.last.tensors) + ", " + mb(g.first.tensor_bytes) + " -> " +
                           mb(g.last.tensor_bytes) + ")";
  const std::string who = "rank " + std::to_string(rank);
  if (g.graph_grows)
    return check_result(
        id, CheckStatus::fail,
        who + " keeps autograd graphs alive: the nodes its live tensors reach grow " +
            fmt("%.1f", static_cast<double>(g.last.graph_nodes - g.first.graph_nodes) / steps) + " per step" + span +
            held_by(g) +
            ": a loss or output kept with its graph step after step (`total += loss` instead of loss.item(), or "
            "outputs appended without .detach()) holds every step's activations",
        d);
  const std::string grows = who + "'s live tensors grow " +
                            fmt("%.1f", static_cast<double>(g.last.tensors - g.first.tensors) / steps) + " per step" +
                            span + held_by(g);
  if (g.across_epochs)
    return check_result(id, CheckStatus::fail,
                        grows + ", on from epoch " + std::to_string(g.from_epoch) + " into " +
                            std::to_string(g.last.epoch) +
                            ": tensors kept step after step and never released (a list of outputs, a cache keyed by "
                            "the step); " +
                            projected(bytes_per_step),
                        d);
  return check_result(id, CheckStatus::warn,
                      grows + ", within epoch " + std::to_string(g.from_epoch) +
                          ": released at the epoch's end (outputs gathered for an epoch's metric)? The run saw no "
                          "epoch end to tell; if not, " +
                          projected(bytes_per_step),
                      d);
}

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
    s.warm = warm;
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
  std::vector<TensorGrowth> tensors;
  for (size_t r = 0; r < ranks.size(); ++r) {
    tensors.push_back(tensor_growth(e.per_rank[r], ranks[r].warm));
    d["ranks"][r]["censuses"] = tensors.back().censuses;
    d["ranks"][r]["tensors_grow"] = tensors.back().tensors_grow;
    d["ranks"][r]["graph_grows"] = tensors.back().graph_grows;
  }
  for (size_t r = 0; r < ranks.size(); ++r)
    if (tensors[r].grows()) return tensors_grow(id, r, tensors[r], d);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double per_step = growth[r].per_sample;
    if (growth[r].grows && tensors[r].censuses >= kCensusMin)
      return check_result(id, CheckStatus::warn,
                          "rank " + std::to_string(r) + "'s " + said(ranks[r].measure) + " grows " +
                              fmt("%.0f KB", per_step / 1e3) + " per step from step " +
                              std::to_string(ranks[r].from_step) + " (+" +
                              mb(per_step * static_cast<double>(ranks[r].bytes.size() - 1)) + " over " +
                              std::to_string(ranks[r].bytes.size()) + " steps) while its live tensors do not (" +
                              std::to_string(tensors[r].last.tensors) + " over " + std::to_string(tensors[r].censuses) +
                              " censuses): memory held outside tensors (a Python-side cache, an allocator's pages); " +
                              projected(per_step),
                          d);
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
  const TensorGrowth& t0 = tensors.front();
  const std::string counted = t0.censuses >= kCensusMin
                                  ? "; live tensors steady (" + std::to_string(t0.last.tensors) + " on rank 0 over " +
                                        std::to_string(t0.censuses) + " censuses)"
                                  : "";
  return check_result(id, CheckStatus::pass,
                      "no growth after warm-up on any rank (" + what + ", " + std::to_string(window) +
                          " steps from step " + std::to_string(ranks.front().from_step) + ")" + counted +
                          "; peak per rank " + peaks,
                      d);
}

}  // namespace ddp
