// numerics.reference: the ranks' synced gradients and activations against a single-process reference on the union
// of their samples, and the likely cause when they differ.
#include <algorithm>
#include <cmath>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "traces/base/text_format.h"

namespace ddp {

TensorCompare compare_values(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref,
                             double rtol, double atol) {
  TensorCompare c;
  c.name = name;
  if (got.size() != ref.size()) {
    c.ok = false;
    c.max_abs_diff = INFINITY;
    return c;
  }
  double largest = 0;
  for (double r : ref)
    if (std::isfinite(r)) largest = std::max(largest, std::fabs(r));
  double gr = 0, rr = 0, worst_excess = -INFINITY;
  for (size_t i = 0; i < got.size(); ++i) {
    // NaN-aware: the same non-finite value on both sides agrees (numerics.finite names where it began); one side
    // only is a difference no tolerance covers.
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) {
      if (std::isnan(got[i]) && std::isnan(ref[i])) continue;
      if (got[i] == ref[i]) continue;  // the same infinity
      c.ok = false;
      c.nonfinite = true;
      c.max_abs_diff = INFINITY;
      c.max_allowed = atol;
      worst_excess = INFINITY;
      continue;
    }
    double diff = std::fabs(got[i] - ref[i]);
    double allowed = atol + rtol * std::fabs(ref[i]) + kTensorRtol * largest;
    if (!(diff <= allowed)) c.ok = false;  // NaN fails too
    if (diff - allowed > worst_excess) {
      worst_excess = diff - allowed;
      c.max_abs_diff = diff;
      c.max_allowed = allowed;
    }
    gr += got[i] * ref[i];
    rr += ref[i] * ref[i];
  }
  c.scale = rr > 0 ? gr / rr : 1.0;
  c.reference_zero = rr == 0 && largest == 0;
  return c;
}

namespace {
// A synced gradient k times the single-process gradient of the same global batch: what makes a loss k times too
// large, the candidates the counts allow (k = the micro-batches accumulated, k = the world size).
std::string scaled_up(int k, int world, int micro_batches) {
  const std::string K = std::to_string(k);
  std::vector<std::string> sources;
  if (k == micro_batches)
    sources.push_back("accumulation over " + K + " micro-batches whose losses are not divided by " + K +
                      " (the Hugging Face Trainer leaves that division to num_items_in_batch for a model that takes "
                      "loss kwargs: a loss that ignores it is then " +
                      K + "x)");
  if (k == world)
    sources.push_back(
        "the world size applied twice: a loss multiplied by the number of processes before DDP averages (the Hugging "
        "Face Trainer does so with average_tokens_across_devices for a model that takes loss kwargs: one whose loss "
        "ignores num_items_in_batch then trains on world x the gradient), or gradients summed, not averaged, across "
        "ranks");
  if (sources.empty()) sources.push_back("a loss scaled " + K + " times by the script");
  std::string s = "gradients are " + K + "x the single-process gradient of the same global batch: ";
  for (size_t i = 0; i < sources.size(); ++i) s += (i ? "; or " : "") + sources[i];
  return s;
}
}  // namespace

CheckResult judge_numerics(const std::vector<NumericsEvidence>& steps, int world, double rtol, double atol) {
  nlohmann::json d = {{"rtol", rtol}, {"atol", atol}, {"steps", nlohmann::json::array()}};
  size_t compared = 0;
  for (const auto& s : steps) {
    nlohmann::json sj = {{"step", s.step},
                         {"rank", s.rank},
                         {"grads", nlohmann::json::array()},
                         {"activations", nlohmann::json::array()}};
    for (const auto& g : s.grads)
      sj["grads"].push_back({{"name", g.name},
                             {"max_abs_diff", g.max_abs_diff},
                             {"allowed", g.max_allowed},
                             {"scale", g.scale},
                             {"ok", g.ok}});
    for (size_t i = 0; i < s.activations.size(); ++i)
      sj["activations"].push_back({{"layer", s.activations[i].name},
                                   {"kind", i < s.layer_kinds.size() ? s.layer_kinds[i] : ""},
                                   {"max_abs_diff", s.activations[i].max_abs_diff},
                                   {"ok", s.activations[i].ok}});
    d["steps"].push_back(sj);
  }
  for (const auto& s : steps) {
    auto bad = std::find_if(s.grads.begin(), s.grads.end(), [](const TensorCompare& c) { return !c.ok; });
    compared += s.grads.size();
    if (bad == s.grads.end()) continue;
    std::string where =
        "step " + std::to_string(s.step) + ", rank " + std::to_string(s.rank) + ", first at " + bad->name +
        (bad->nonfinite ? std::string(": non-finite on one side only (NaN or inf in the rank's gradient "
                                      "or the reference's, not both)")
                        : ": max |diff| " + fmt("%.3g", bad->max_abs_diff) + " > allowed " +
                              fmt("%.3g", bad->max_allowed) + ", ratio to reference " + fmt("%.4g", bad->scale));
    std::string cause;
    auto first_act =
        std::find_if(s.activations.begin(), s.activations.end(), [](const TensorCompare& c) { return !c.ok; });
    if (bad->outside_optimizer)
      cause = bad->name +
              " is in no optimizer param_group: its gradient is never zeroed and piles up (a layer "
              "replaced after the optimizer was built?)";
    else if (bad->piles_up)
      cause =
          "the gradient is this step's plus the last step's: optimizer.zero_grad() is not called between "
          "optimizer steps";
    else if (bad->nonfinite)
      cause = "non-finite numbers (see numerics.finite)";
    else if (!s.samples_follow_rule)
      cause = "a rank saw other samples than the sampler rule assigns (see data.shard_rule)";
    else if (std::fabs(bad->scale * world - 1) < 0.02)
      cause = "gradients are 1/" + std::to_string(world) +
              " of the single-process gradient: a sum-reduced loss, averaged across ranks (use mean, or scale by the "
              "world size)";
    else if (const double k = std::round(bad->scale); k >= 2 && std::fabs(bad->scale / k - 1) < 0.02)
      cause = scaled_up(static_cast<int>(k), world, s.micro_batches);
    else if (first_act != s.activations.end()) {
      size_t i = static_cast<size_t>(first_act - s.activations.begin());
      std::string kind = i < s.layer_kinds.size() ? s.layer_kinds[i] : "";
      cause = "activations first diverge at layer " + first_act->name + (kind.empty() ? "" : " (" + kind + ")");
      if (kind.find("BatchNorm") != std::string::npos)
        cause += ": per-rank batch statistics differ from the global batch's (use SyncBatchNorm, or accept it)";
    } else {
      cause = "activations agree; the difference arises in the backward pass or the reduction";
    }
    d["first_divergence"] = {{"step", s.step}, {"rank", s.rank}, {"tensor", bad->name}, {"ratio", bad->scale}};
    return check_result(check_id::kReference, CheckStatus::fail, where + ". Likely cause: " + cause, d);
  }
  if (compared == 0) return check_result(check_id::kReference, CheckStatus::fail, "no gradients were compared", d);
  bool all_zero = true;  // zeros equal zeros whatever the reduction does: no pass
  for (const auto& s : steps)
    for (const auto& g : s.grads) all_zero &= g.reference_zero;
  if (all_zero)
    return check_result(check_id::kReference, CheckStatus::warn,
                        "every reference gradient is exactly zero in the " +
                            std::to_string(steps.size() / std::max(world, 1)) +
                            " verified step(s): equal zeros prove nothing about the reduction (see train.learns)",
                        d);
  return check_result(check_id::kReference, CheckStatus::pass,
                      "synced gradients match a single-rank reference on the union of the ranks' samples for " +
                          std::to_string(steps.size() / std::max(world, 1)) + " step(s) x " + std::to_string(world) +
                          " ranks, " + std::to_string(compared) + " tensors within rtol " + fmt("%.2g", rtol) +
                          ", atol " + fmt("%.2g", atol),
                      d);
}

CheckResult judge_numerics_outcome(const NumericsOutcome& o) {
  if (!o.failure.empty()) return check_result(check_id::kReference, CheckStatus::fail, o.failure);
  if (!o.skipped.empty()) return check_result(check_id::kReference, CheckStatus::skip, o.skipped);
  // Nothing wrong was found, but nothing could be compared: said, never a pass or a false fail.
  if (!o.not_compared.empty()) return check_result(check_id::kReference, CheckStatus::warn, o.not_compared);
  CheckResult r = judge_numerics(o.steps, o.world, kFloat32Rtol, kFloat32Atol);
  if (o.dropout_off_modules > 0) {
    // Say exactly what was compared: the same model with its Dropout modules off, everything else in train mode.
    r.summary += " (the forward is stochastic: compared with its " + std::to_string(o.dropout_off_modules) +
                 " Dropout module(s) off in the verified steps, BatchNorm and the rest in train mode)";
    r.details["dropout_off_modules"] = o.dropout_off_modules;
  }
  return r;
}

}  // namespace ddp
