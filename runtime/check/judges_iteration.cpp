// train.iteration: one of each per iteration. Between two optimizer steps a training loop runs zero_grad, K forwards
// through the DDP model and their K backwards (K = 1 without accumulation), then the step — in that order, once per
// step. What each rank counted (python/ddp_profile/iteration.py) is held to that, step by step; the first step that
// breaks it is named with its counts:
// - a step with no forward and no backward since the one before: optimizer.step() called twice per iteration;
// - backwards with no forward through the DDP model: the forward bypassed the wrapper (model.module(x)), so DDP
//   never allreduced those gradients; a parameter with a gradient DDP never registered (changed after wrapping);
// - the first backward after a step found that step's gradients still there: nothing zeroed them, they pile up;
// - the step ran after a training forward and before its backward: it applied the previous iteration's gradients.
#include <algorithm>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"

namespace ddp {
namespace {

struct Broken {
  int64_t step = -1;
  size_t rank = 0;
  std::string what;
};

std::string on(size_t rank, int64_t step) { return "rank " + std::to_string(rank) + ", step " + std::to_string(step); }

// The first break of the invariant in one rank's steps, with how often it breaks there.
Broken first_break(size_t rank, const std::vector<TrainingStep>& steps) {
  int64_t empty = 0, first_empty = -1;
  for (size_t i = 1; i < steps.size(); ++i)
    if (steps[i].forwards == 0 && steps[i].backwards == 0 && ++empty == 1) first_empty = steps[i].step;
  for (size_t i = 0; i < steps.size(); ++i) {
    const TrainingStep& t = steps[i];
    if (t.step == first_empty) {
      const int64_t iterations = static_cast<int64_t>(steps.size()) - empty;
      return {t.step, rank,
              "optimizer.step() ran " + std::to_string(steps.size()) + " times for " + std::to_string(iterations) +
                  " iterations: " + std::to_string(empty) +
                  " step(s) with no forward and no backward since the step before (first " + on(rank, t.step) +
                  "): the optimizer steps more often than the loop iterates (a second optimizer.step() per "
                  "iteration?)"};
    }
    // Step 0 may begin before the companion's forward hook (ddp_profile.auto attaches at the first forward).
    if (i > 0 && t.forwards == 0 && t.backwards > 0)
      return {t.step, rank,
              on(rank, t.step) + ": " + std::to_string(t.backwards) +
                  " backward(s) and no forward through the DDP model: the forward bypasses the wrapper "
                  "(model.module(x), or the model before DDP(...)), and DDP allreduces no gradient of it"};
    if (!t.frozen_at_wrap.empty())
      return {t.step, rank,
              on(rank, t.step) + ": " + name_list(t.frozen_at_wrap) +
                  " received gradients DDP never allreduces: they required no grad when DDP(...) wrapped the module "
                  "(frozen then, unfrozen since), so DDP registered no hook for them; each rank steps its own "
                  "gradient there. Unfreeze before wrapping, or wrap again after unfreezing"};
    if (!t.outside_ddp.empty())
      return {t.step, rank,
              on(rank, t.step) + ": " + name_list(t.outside_ddp) +
                  " received gradients DDP never allreduces: not among the parameters DDP registered when it wrapped "
                  "the module (a layer replaced or added after DDP(...)); each rank steps its own gradient there. "
                  "Change the model before wrapping it"};
    if (t.stale_grads)
      return {t.step, rank,
              on(rank, t.step) + ": the first backward found step " + std::to_string(steps[i - 1].step) +
                  "'s gradients still there: nothing zeroed them (optimizer.zero_grad() not called each "
                  "iteration), so every step applies the sum of all gradients so far"};
    if (t.step_before_backward)
      return {t.step, rank,
              on(rank, t.step) + ": optimizer.step() ran after the forward and before its backward (" +
                  std::to_string(t.forwards) + " forward(s), " + std::to_string(t.backwards) +
                  " backward(s) before it): it applies the previous iteration's gradients"};
  }
  return {};
}

}  // namespace

CheckResult judge_iteration(const TrainingEvidence& e) {
  const char* id = check_id::kIteration;
  if (!e.failure.empty()) return check_result(id, CheckStatus::fail, e.failure);
  if (e.per_rank.empty() || e.per_rank.front().empty())
    return check_result(id, CheckStatus::fail, "no optimizer step was logged: nothing says the job iterates");
  Broken first;
  for (size_t r = 0; r < e.per_rank.size(); ++r) {
    Broken b = first_break(r, e.per_rank[r]);
    if (!b.what.empty() && (first.what.empty() || b.step < first.step)) first = b;
  }
  const auto& steps = e.per_rank.front();
  int max_forwards = 0, max_backwards = 0;
  for (const TrainingStep& t : steps) {
    max_forwards = std::max(max_forwards, t.forwards);
    max_backwards = std::max(max_backwards, t.backwards);
  }
  nlohmann::json d = {
      {"steps", steps.size()}, {"max_forwards_per_step", max_forwards}, {"max_backwards_per_step", max_backwards}};
  if (!first.what.empty()) {
    d["first_step"] = first.step;
    d["rank"] = first.rank;
    return check_result(id, CheckStatus::fail, first.what, d);
  }
  const std::string per_step = max_forwards > 1
                                   ? "up to " + std::to_string(max_forwards) + " forwards and backwards (accumulation)"
                                   : "one forward and one backward";
  return check_result(id, CheckStatus::pass,
                      "every optimizer step follows " + per_step +
                          " through the DDP model, after the backward, with the gradients zeroed since the step "
                          "before (" +
                          std::to_string(steps.size()) + " steps, " + std::to_string(e.per_rank.size()) + " ranks)",
                      d);
}

}  // namespace ddp
