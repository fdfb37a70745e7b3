// comm.no_sync: with gradient accumulation, only the last micro-step of an optimizer step communicates (the earlier
// ones run under no_sync), and it does; where the buckets are known (our own job), each bucket is reduced once per
// step and the step moves exactly the parameters' bytes.
#include <map>

#include "runtime/check/check_ids.h"
#include "runtime/check/judges.h"

namespace ddp {
namespace {

CheckResult fail(std::string why, nlohmann::json d = nlohmann::json::object()) {
  return check_result(check_id::kNoSync, CheckStatus::fail, std::move(why), std::move(d));
}

// The first micro-step that breaks the rule, or "".
std::string micro_step_problem(size_t rank, int64_t step, const std::vector<MicroComm>& micros) {
  for (size_t k = 0; k < micros.size(); ++k) {
    const MicroComm& m = micros[k];
    const bool communicated = m.collectives >= 0 ? m.collectives > 0 : m.sync_flag;
    const bool last = k + 1 == micros.size();
    const std::string where = "rank " + std::to_string(rank) + ", step " + std::to_string(step) + ": ";
    if (!last && communicated)
      return where + "micro-step " + std::to_string(k) + " of " + std::to_string(micros.size()) + " ran " +
             (m.collectives >= 0 ? std::to_string(m.collectives) + " gradient allreduce(s)"
                                 : std::string("with gradient sync on")) +
             " before the last micro-step: no_sync was not in effect (accumulate the earlier micro-steps inside "
             "`with model.no_sync():`, so a step communicates once)";
    if (last && !communicated)
      return where +
             "the last micro-step did not synchronise gradients (the optimizer stepped on this rank's own "
             "gradients): leave the last backward outside no_sync";
  }
  return {};
}

std::string volume_problem(size_t rank, const StepVolume& v, size_t buckets, uint64_t param_bytes) {
  const std::string where = "rank " + std::to_string(rank) + " step " + std::to_string(v.step);
  if (v.buckets_reduced != buckets || !v.each_bucket_once)
    return where + ": " + std::to_string(v.buckets_reduced) + " of " + std::to_string(buckets) +
           " buckets reduced, each must be exactly once";
  if (v.bytes != param_bytes)
    return where + " reduced " + std::to_string(v.bytes) + " bytes, the parameters hold " + std::to_string(param_bytes);
  return {};
}

}  // namespace

CheckResult judge_no_sync(const NoSyncEvidence& e) {
  if (!e.failure.empty()) return fail(e.failure);
  if (!e.skipped.empty()) return check_result(check_id::kNoSync, CheckStatus::skip, e.skipped);
  int64_t steps = 0, accumulating = 0;
  bool counted = true;
  for (size_t r = 0; r < e.per_rank.size(); ++r) {
    std::map<int64_t, std::vector<MicroComm>> by_step;
    for (const auto& m : e.per_rank[r]) by_step[m.step].push_back(m);
    for (const auto& [step, micros] : by_step) {
      ++steps;
      if (micros.size() > 1) ++accumulating;
      for (const auto& m : micros) counted = counted && m.collectives >= 0;
      if (std::string p = micro_step_problem(r, step, micros); !p.empty())
        return fail(p, {{"rank", r}, {"step", step}, {"micro_steps", micros.size()}});
    }
  }
  if (steps == 0) return fail("no micro-steps were recorded");
  nlohmann::json d = {{"steps", steps}, {"accumulating_steps", accumulating}};
  std::string volume;
  if (!e.volumes.empty()) {
    d["buckets"] = e.buckets;
    d["param_bytes"] = e.param_bytes;
    for (size_t r = 0; r < e.volumes.size(); ++r)
      for (const StepVolume& v : e.volumes[r])
        if (std::string p = volume_problem(r, v, e.buckets, e.param_bytes); !p.empty()) return fail(p, d);
    volume = "; each of " + std::to_string(e.buckets) + " bucket(s) reduced once per step, " +
             std::to_string(e.param_bytes) + " bytes = the parameters' bytes";
  }
  const std::string how = counted ? e.counted_how : "from DDP's sync flag (the script has its own comm hook)";
  if (accumulating == 0)
    return check_result(check_id::kNoSync, CheckStatus::pass,
                        "no gradient accumulation: every optimizer step synchronised once (" + how + ")" + volume, d);
  return check_result(check_id::kNoSync, CheckStatus::pass,
                      std::to_string(accumulating) +
                          " accumulated step(s) across ranks communicated once each, on their last micro-step (" + how +
                          ")" + volume,
                      d);
}

}  // namespace ddp
