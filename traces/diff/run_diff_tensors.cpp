// Where the per-layer tensor summaries of two runs first diverge, and the likely cause.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "traces/base/text_format.h"
#include "traces/diff/run_diff_steps.h"

namespace ddp::run_diff_detail {
namespace {

// A statistic as a double; null (how JSON stores NaN/inf) and absent become NaN.
double stat(const nlohmann::json& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_number()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

double rel_diff(double a, double b, double floor_scale) {
  double scale = std::max({std::fabs(a), std::fabs(b), floor_scale});
  if (scale == 0) return 0;
  return std::fabs(a - b) / scale;
}

using TensorKey = std::tuple<int64_t, std::string, int, std::string>;  // step, kind, micro, name
TensorKey key_of(const TensorRecord& r) { return {r.step, r.kind, r.micro, r.name}; }

// Records in step order, keeping file order inside a step (parameters, activations per micro-step, gradients).
std::vector<const TensorRecord*> ordered(const std::vector<TensorRecord>& v) {
  std::vector<const TensorRecord*> out;
  for (const auto& r : v) out.push_back(&r);
  std::stable_sort(out.begin(), out.end(),
                   [](const TensorRecord* x, const TensorRecord* y) { return x->step < y->step; });
  return out;
}

// Compares one record pair. Returns 0 identical (hash), 1 within tolerance, 2 diverged (with `d` filled).
int compare_record(const TensorRecord& ra, const TensorRecord& rb, double rtol, TensorDivergence& d) {
  d.step = ra.step;
  d.kind = ra.kind;
  d.micro = ra.micro;
  d.name = ra.name;
  d.a = ra.stats;
  d.b = rb.stats;
  auto ha = ra.stats.find("hash");
  auto hb = rb.stats.find("hash");
  if (ha != ra.stats.end() && hb != rb.stats.end() && ha->is_string() && *ha == *hb) return 0;
  double ca = stat(ra.stats, "count"), cb = stat(rb.stats, "count");
  if (!(ca == cb)) {
    d.reason = "count";
    return 2;
  }
  std::vector<std::string> why;
  const char* names[3] = {"mean", "std", "l2"};
  double* rel[3] = {&d.rel_mean, &d.rel_std, &d.rel_l2};
  double la = stat(ra.stats, "l2"), lb = stat(rb.stats, "l2");
  double rms = 0;
  if (ca > 0) {
    if (std::isfinite(la)) rms = std::max(rms, la / std::sqrt(ca));
    if (std::isfinite(lb)) rms = std::max(rms, lb / std::sqrt(cb));
  }
  bool not_finite = false;
  for (int i = 0; i < 3; ++i) {
    double va = stat(ra.stats, names[i]), vb = stat(rb.stats, names[i]);
    bool fa = std::isfinite(va), fb = std::isfinite(vb);
    if (!fa || !fb) {
      // An empty tensor has no statistics on either side: nothing to compare. Otherwise non-finite on one side only
      // (or on both, with different hashes: NaN never equals NaN) is a divergence.
      if (ca == 0) continue;
      if (fa != fb || (!fa && !fb)) {
        *rel[i] = std::numeric_limits<double>::infinity();
        not_finite = true;
      }
      continue;
    }
    *rel[i] = rel_diff(va, vb, i == 0 ? rms : 0.0);
    if (*rel[i] > rtol) why.push_back(names[i]);
  }
  if (not_finite) why.insert(why.begin(), "not finite");
  if (why.empty()) return 1;
  for (size_t i = 0; i < why.size(); ++i) d.reason += (i ? "," : "") + why[i];
  return 2;
}

// Everything before the first divergence matched, so where it starts says what probably differs.
std::string hint_for(const TensorDivergence& d, bool first_activation_of_micro) {
  if (d.reason == "count") return "the tensor's shape differs: batch size, accumulation or model changed";
  if (d.kind == "param")
    return d.step == 0 ? "the initial weights differ: seed, model or initialisation"
                       : "everything of step " + std::to_string(d.step - 1) +
                             " matched, so the optimizer update differs: learning rate, optimizer or loss scaling";
  if (d.kind == "activation")
    return first_activation_of_micro
               ? "the weights match but the first layer's output differs: the input batch differs (sampler, seed, "
                 "batch size, world size) or its arithmetic does (AMP)"
               : "the earlier layers matched, so this layer computes differently: BatchNorm batch statistics, AMP "
                 "or dropout";
  if (d.kind == "grad") {
    std::string h =
        "the forward matched, the gradients differ: loss reduction, gradient averaging over ranks or the "
        "allreduce";
    double la = stat(d.a, "l2"), lb = stat(d.b, "l2");
    if (std::isfinite(la) && std::isfinite(lb) && la > 0)
      h += " (l2 ratio B/A " + fmt("%.4g", lb / la) + "; a ratio of W or 1/W points to a sum-reduced loss)";
    return h;
  }
  return {};
}

bool earlier(const TensorDivergence& x, int x_order, const TensorDivergence& y, int y_order) {
  if (x.step != y.step) return x.step < y.step;
  return x_order < y_order;
}

}  // namespace

TensorDiff diff_tensors(const DiffRun& a, const DiffRun& b, double rtol) {
  TensorDiff out;
  out.rtol = rtol;
  if (a.summaries.empty() || b.summaries.empty()) {
    out.note = std::string(a.summaries.empty() && b.summaries.empty() ? "neither run has"
                           : a.summaries.empty()                      ? "run A has no"
                                                                      : "run B has no") +
               " tensor summaries (run with --verify-steps N)";
    return out;
  }
  out.compared = true;
  int first_order = 0;
  for (const auto& [rank, recs_a] : a.summaries) {
    auto ib = b.summaries.find(rank);
    if (ib == b.summaries.end()) continue;
    RankTensorDiff rd;
    rd.rank = rank;
    std::map<TensorKey, const TensorRecord*> by_key;
    for (const auto& r : ib->second) by_key.emplace(key_of(r), &r);
    std::set<TensorKey> matched;
    int order = 0, div_order = 0;
    const TensorRecord* prev = nullptr;
    for (const TensorRecord* ra : ordered(recs_a)) {
      ++order;
      bool first_act = !prev || prev->step != ra->step || prev->kind != "activation" || prev->micro != ra->micro;
      prev = ra;
      auto it = by_key.find(key_of(*ra));
      if (it == by_key.end()) {
        rd.only_a++;
        continue;
      }
      matched.insert(it->first);
      rd.compared++;
      TensorDivergence d;
      d.rank = rank;
      int v = compare_record(*ra, *it->second, rtol, d);
      if (v == 0) {
        rd.identical++;
        continue;
      }
      if (!rd.first_hash_difference) rd.first_hash_difference = d;
      if (v == 1) {
        rd.within_tolerance++;
        continue;
      }
      rd.diverged++;
      if (!rd.first_divergence) {
        d.hint = hint_for(d, first_act);
        rd.first_divergence = d;
        div_order = order;
      }
    }
    rd.only_b = by_key.size() - matched.size();
    if (rd.first_divergence && (!out.first || earlier(*rd.first_divergence, div_order, *out.first, first_order))) {
      out.first = rd.first_divergence;
      first_order = div_order;
    }
    out.ranks.push_back(rd);
  }
  if (out.ranks.empty()) {
    out.compared = false;
    out.note = "the runs have tensor summaries of different ranks";
  }
  return out;
}

}  // namespace ddp::run_diff_detail
