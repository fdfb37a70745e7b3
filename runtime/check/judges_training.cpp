// Whether the training is right, step by step, from the ranks' training logs: the job learns (train.learns), its
// numbers stay finite (numerics.finite), it trains in train mode (train.mode), its scheduler steps with the optimizer
// (train.schedule). Each a pure function of TrainingEvidence: a green row says what was seen, never "nothing found".
#include <algorithm>
#include <map>
#include <set>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"
#include "traces/base/text_format.h"

namespace ddp {
namespace {

size_t steps_logged(const TrainingEvidence& e) {
  size_t n = 0;
  for (const auto& r : e.per_rank) n += r.size();
  return n;
}

// The names present in `pick(step)` at every logged step of every rank (those with a step at all), in first order.
template <class Pick>
std::vector<std::string> at_every_step(const TrainingEvidence& e, Pick pick) {
  std::vector<std::string> order;
  std::map<std::string, size_t> seen;
  size_t steps = 0;
  for (const auto& rank : e.per_rank)
    for (const TrainingStep& s : rank) {
      if (!pick(s)) continue;
      ++steps;
      for (const std::string& n : *pick(s))
        if (seen[n]++ == 0) order.push_back(n);
    }
  std::vector<std::string> out;
  for (const auto& n : order)
    if (seen[n] == steps) out.push_back(n);
  return steps ? out : std::vector<std::string>{};
}

// The first step (over all ranks, the lowest) at which some parameter received a gradient and requires grad but
// no optimizer holds it: unfrozen after the optimizer was built without it, or added since. Null when none.
const TrainingStep* first_outside_optimizer(const TrainingEvidence& e, size_t* rank) {
  const TrainingStep* first = nullptr;
  for (size_t r = 0; r < e.per_rank.size(); ++r)
    for (const TrainingStep& s : e.per_rank[r])
      if (!s.outside_optimizer.empty() && (!first || s.step < first->step)) {
        first = &s;
        *rank = r;
        break;
      }
  return first;
}

CheckResult no_log(const char* id, const TrainingEvidence& e) {
  if (!e.failure.empty()) return check_result(id, CheckStatus::fail, e.failure);
  return check_result(id, CheckStatus::fail, "no optimizer step was logged: nothing says the job trains");
}

}  // namespace

CheckResult judge_learns(const TrainingEvidence& e) {
  const char* id = check_id::kLearns;
  if (!e.failure.empty() || steps_logged(e) == 0) return no_log(id, e);
  nlohmann::json d = {
      {"steps", e.per_rank.front().size()}, {"ranks", e.per_rank.size()}, {"outside_optimizer", e.outside_optimizer}};
  if (!e.outside_optimizer.empty())
    return check_result(id, CheckStatus::fail,
                        name_list(e.outside_optimizer) +
                            " require grad but are in no optimizer param_group: never updated, their gradients never "
                            "zeroed (a layer replaced after the optimizer was built?)",
                        d);
  size_t on_rank = 0;
  if (const TrainingStep* s = first_outside_optimizer(e, &on_rank)) {
    d["outside_optimizer_from"] = {{"step", s->step}, {"rank", on_rank}, {"names", s->outside_optimizer}};
    return check_result(id, CheckStatus::fail,
                        name_list(s->outside_optimizer) + " receive gradients from step " + std::to_string(s->step) +
                            " (rank " + std::to_string(on_rank) +
                            ") but are in no optimizer param_group: never updated (unfrozen after the optimizer was "
                            "built without them? add them with optimizer.add_param_group when unfreezing)",
                        d);
  }
  const auto zero = at_every_step(e, [](const TrainingStep& s) { return &s.grad_zero; });
  d["zero_at_every_step"] = zero;
  if (!zero.empty()) {
    const std::string steps = std::to_string(e.per_rank.front().size());
    const bool all = static_cast<int>(zero.size()) == e.per_rank.front().front().params;
    return check_result(id, CheckStatus::fail,
                        all ? "every parameter's synced gradient is exactly zero at all " + steps +
                                  " steps: the loss does not depend on the parameters (a constant loss? "
                                  "cross_entropy over a single logit?), the model never changes"
                            : name_list(zero) + ": synced gradient exactly zero at all " + steps +
                                  " steps: the loss does not depend on " + (zero.size() > 1 ? "them" : "it"),
                        d);
  }
  std::vector<std::string> unchanged;
  bool any_verified = false;
  for (const auto& rank : e.per_rank)
    for (const auto& s : rank) any_verified |= s.verified;
  if (any_verified) {
    unchanged = at_every_step(e, [](const TrainingStep& s) { return s.verified ? &s.unchanged : nullptr; });
    d["unchanged_by_every_verified_step"] = unchanged;
    if (!unchanged.empty())
      return check_result(id, CheckStatus::fail,
                          "the optimizer step leaves " + name_list(unchanged) +
                              " bit for bit unchanged in every verified step although its gradient is not zero "
                              "(learning rate 0? a param_group frozen?)",
                          d);
  }
  const auto none = at_every_step(e, [](const TrainingStep& s) { return &s.grad_none; });
  if (!none.empty()) {
    d["no_gradient"] = none;
    return check_result(id, CheckStatus::warn,
                        name_list(none) +
                            " require grad but received no gradient in any step (unused by the forward; "
                            "set requires_grad=False if that is meant)",
                        d);
  }
  return check_result(id, CheckStatus::pass,
                      "every parameter that requires grad is in a param_group, its synced gradient is non-zero in " +
                          std::string(any_verified ? "some step and the optimizer step changes it (" : "some step (") +
                          std::to_string(e.per_rank.front().size()) + " steps x " + std::to_string(e.per_rank.size()) +
                          " ranks)",
                      d);
}

CheckResult judge_finite(const TrainingEvidence& e) {
  const char* id = check_id::kFinite;
  if (!e.failure.empty() || steps_logged(e) == 0) return no_log(id, e);
  const TrainingStep* first = nullptr;
  int first_rank = 0;
  for (size_t r = 0; r < e.per_rank.size(); ++r)
    for (const TrainingStep& s : e.per_rank[r])
      if ((!s.output_finite || !s.grad_nonfinite.empty()) && (!first || s.step < first->step)) {
        first = &s;
        first_rank = static_cast<int>(r);
        break;
      }
  if (!first)
    return check_result(id, CheckStatus::pass,
                        "every training forward's output and every synced gradient finite at all " +
                            std::to_string(e.per_rank.front().size()) + " steps on " +
                            std::to_string(e.per_rank.size()) + " ranks",
                        {{"steps", e.per_rank.front().size()}});
  // The first layer the companion found non-finite (on the first non-finite forward, possibly a later step).
  std::string layer;
  int64_t layer_step = -1;
  for (const TrainingStep& s : e.per_rank[first_rank])
    if (!s.first_nonfinite_layer.empty()) {
      layer = s.first_nonfinite_layer;
      layer_step = s.step;
      break;
    }
  nlohmann::json d = {{"first_step", first->step},
                      {"rank", first_rank},
                      {"output_finite", first->output_finite},
                      {"nonfinite_gradients", first->grad_nonfinite},
                      {"first_nonfinite_layer", layer}};
  std::string where = "rank " + std::to_string(first_rank) + ", step " + std::to_string(first->step) + ": ";
  if (!first->output_finite)
    where += "the forward output is not finite" + (layer.empty() ? std::string() : ", first at layer " + layer) +
             (first->grad_nonfinite.empty() ? "" : "; gradients of " + name_list(first->grad_nonfinite, 3));
  else
    where +=
        "the forward output is finite but the synced gradients of " + name_list(first->grad_nonfinite, 3) +
        " are not: made by the loss or the backward (a learning rate too high? a log or division of 0?)" +
        (layer.empty() ? "" : "; at step " + std::to_string(layer_step) + " the first non-finite layer is " + layer);
  return check_result(id, CheckStatus::fail, where, d);
}

CheckResult judge_mode(const TrainingEvidence& e) {
  const char* id = check_id::kMode;
  if (!e.failure.empty() || steps_logged(e) == 0) return no_log(id, e);
  std::set<int64_t> eval_steps;
  std::vector<std::string> modules;
  for (const auto& rank : e.per_rank)
    for (const TrainingStep& s : rank) {
      if (s.model_in_eval) eval_steps.insert(s.step);
      for (const auto& m : s.eval_modules)
        if (std::find(modules.begin(), modules.end(), m) == modules.end()) modules.push_back(m);
    }
  nlohmann::json d = {{"eval_steps", eval_steps.size()}, {"eval_modules", modules}};
  if (!eval_steps.empty())
    return check_result(id, CheckStatus::fail,
                        std::to_string(eval_steps.size()) + " optimizer step(s), from step " +
                            std::to_string(*eval_steps.begin()) +
                            ", ran their forward with the model in eval mode (model.train() not called after "
                            "model.eval()?)" +
                            (modules.empty() ? "" : ": " + name_list(modules) + " off while training"),
                        d);
  if (!modules.empty())
    return check_result(id, CheckStatus::warn,
                        name_list(modules) +
                            " ran in eval mode in training forwards while the model trains (frozen batch norm? "
                            "fine if meant)",
                        d);
  return check_result(id, CheckStatus::pass,
                      "every training forward ran with the model and its dropout and batch-norm modules in train "
                      "mode (" +
                          std::to_string(e.per_rank.front().size()) + " steps)",
                      d);
}

CheckResult judge_schedule(const TrainingEvidence& e) {
  const char* id = check_id::kSchedule;
  if (!e.failure.empty() || steps_logged(e) == 0) return no_log(id, e);
  const auto& steps = e.per_rank.front();
  if (steps.front().scheduler_steps < 0) {
    // No scheduler: a learning rate that stays put is what the job asks for; one the script moves itself is not
    // judged.
    bool constant = true;
    for (const TrainingStep& t : steps) constant &= t.lrs == steps.front().lrs;
    if (!constant)
      return check_result(id, CheckStatus::skip,
                          "no learning-rate scheduler (none given to attach, none found) and the script changes the "
                          "learning rate itself: not judged");
    return check_result(
        id, CheckStatus::pass,
        "no learning-rate scheduler: the learning rate stays " +
            (steps.front().lrs.empty() ? std::string("as set") : fmt("%.4g", steps.front().lrs.front())) + " for all " +
            std::to_string(steps.size()) + " steps");
  }
  // scheduler.step() calls between two optimizer steps: once (a per-step schedule) or 0 with an occasional 1 (a
  // per-epoch one) is right; more is a schedule run faster than the optimizer steps.
  std::vector<int64_t> per_step;
  for (size_t i = 1; i < steps.size(); ++i)
    if (steps[i].scheduler_steps >= 0 && steps[i - 1].scheduler_steps >= 0)
      per_step.push_back(steps[i].scheduler_steps - steps[i - 1].scheduler_steps);
  nlohmann::json d = {
      {"scheduler_steps_per_optimizer_step", per_step}, {"lr_first", steps.front().lrs}, {"lr_last", steps.back().lrs}};
  if (per_step.empty())
    return check_result(id, CheckStatus::warn, "one optimizer step: too few to see how often the scheduler steps", d);
  std::vector<int64_t> sorted = per_step;
  std::sort(sorted.begin(), sorted.end());
  const int64_t median = sorted[sorted.size() / 2];
  const std::string lr = steps.front().lrs.empty() ? ""
                                                   : ", lr " + fmt("%.4g", steps.front().lrs.front()) + " -> " +
                                                         fmt("%.4g", steps.back().lrs.front());
  const int64_t by_design = std::max<int64_t>(e.scheduler_steps_per_step, 1);
  if (by_design > 1 && median == by_design)
    return check_result(id, CheckStatus::pass,
                        "the scheduler steps " + std::to_string(median) + " times per optimizer step, as designed: " +
                            e.scheduler_rule + " (" + std::to_string(steps.size()) + " steps" + lr + ")",
                        d);
  if (median >= 2 * by_design) {
    const int micro = steps.back().forwards;
    return check_result(id, CheckStatus::fail,
                        "scheduler.step() runs " + std::to_string(median) +
                            " times per optimizer step: the learning rate follows its schedule " +
                            std::to_string(median / by_design) + "x too fast" +
                            (micro > 1 ? " (stepped on every one of " + std::to_string(micro) +
                                             " micro-batches; call it after optimizer.step())"
                                       : "") +
                            lr,
                        d);
  }
  return check_result(
      id, CheckStatus::pass,
      "the scheduler steps at most once per optimizer step (" + std::to_string(steps.size()) + " steps" + lr + ")", d);
}

}  // namespace ddp
