#include "runtime/check/evidence.h"

#include <cstdlib>
#include <map>
#include <set>

#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/model/stages.h"
#include "traces/native/load_run.h"

namespace ddp {

std::vector<ConsumedBatch> read_consumed(const std::string& run_dir, int rank, std::string& error) {
  std::vector<records::samples> lines;
  if (!read_record_lines(in_run(run_dir, verify_samples_file(rank)), lines, error)) return {};
  std::vector<ConsumedBatch> out;
  out.reserve(lines.size());
  for (auto& l : lines)
    out.push_back(
        {static_cast<int>(l.epoch), l.step, static_cast<int>(l.micro), l.batch, std::move(l.indices), l.sampler_epoch});
  return out;
}

Replicas read_replicas(const std::string& run_dir, int rank, std::string& error) {
  std::vector<records::replicas> lines;
  Replicas out;
  if (!read_record_lines(in_run(run_dir, verify_replicas_file(rank)), lines, error)) return out;
  for (auto& l : lines) {
    out.param_hash[l.step] = l.param_hash;
    if (l.state) out.state[l.step] = std::move(*l.state);
  }
  return out;
}

std::map<int64_t, std::string> read_replica_hashes(const std::string& run_dir, int rank, std::string& error) {
  return read_replicas(run_dir, rank, error).param_hash;
}

bool training_step(const records::training& l, TrainingFields fields, TrainingStep& t, std::string& error) {
  t = TrainingStep{};
  t.step = l.step;
  t.rss = l.rss;
  t.heap = l.heap;
  t.cuda_allocated = l.cuda_allocated.value_or(-1);
  if (fields == TrainingFields::memory) return true;
  // The companion writes these on every line (python/ddp_profile/training.py): one missing is a broken contract.
  auto need = [&](const auto& field, const char* key) {
    if (!field)
      error = std::string("step ") + std::to_string(l.step) + ": the companion's field '" + key + "' is missing";
    return field.has_value();
  };
  if (!need(l.params, "params") || !need(l.forwards, "forwards") || !need(l.output_finite, "output_finite") ||
      !need(l.model_in_eval, "model_in_eval") || !need(l.eval_modules, "eval_modules") ||
      !need(l.grad_zero, "grad_zero") || !need(l.grad_nonfinite, "grad_nonfinite") || !need(l.grad_none, "grad_none") ||
      !need(l.lrs, "lrs") || !need(l.backwards, "backwards") || !need(l.stale_grads, "stale_grads") ||
      !need(l.step_before_backward, "step_before_backward"))
    return false;
  t.params = static_cast<int>(*l.params);
  t.forwards = static_cast<int>(*l.forwards);
  t.output_finite = *l.output_finite;
  t.model_in_eval = *l.model_in_eval;
  t.eval_modules = *l.eval_modules;
  t.grad_zero = *l.grad_zero;
  t.grad_nonfinite = *l.grad_nonfinite;
  t.grad_none = *l.grad_none;
  t.verified = l.unchanged.has_value();
  t.unchanged = l.unchanged.value_or(std::vector<std::string>{});
  t.lrs = *l.lrs;
  t.backwards = static_cast<int>(*l.backwards);
  t.stale_grads = *l.stale_grads;
  t.step_before_backward = *l.step_before_backward;
  t.outside_ddp = l.outside_ddp.value_or(std::vector<std::string>{});
  t.frozen_at_wrap = l.frozen_at_wrap.value_or(std::vector<std::string>{});
  t.outside_optimizer = l.outside_optimizer.value_or(std::vector<std::string>{});
  t.census = l.census;
  t.scheduler_steps = l.scheduler_steps.value_or(-1);
  if (l.first_nonfinite_layer) t.first_nonfinite_layer = l.first_nonfinite_layer->layer.value_or("");
  return true;
}

TrainingEvidence read_training(const std::string& run_dir, int world, TrainingFields fields) {
  TrainingEvidence e;
  for (int r = 0; r < world; ++r) {
    const std::string path = in_run(run_dir, verify_log_file(r, kVerifyTraining));
    std::vector<records::training> lines;
    if (!read_record_lines(path, lines, e.failure)) break;
    std::vector<TrainingStep> steps(lines.size());
    std::string why;
    for (size_t i = 0; i < lines.size() && e.failure.empty(); ++i)
      if (!training_step(lines[i], fields, steps[i], why)) e.failure = path + ": " + why;
    if (!e.failure.empty()) break;
    e.per_rank.push_back(std::move(steps));
  }
  if (!e.failure.empty()) e.per_rank.clear();
  return e;
}

std::string resume_data_stream(const std::vector<ConsumedBatch>& straight, const std::vector<ConsumedBatch>& resumed,
                               int64_t resumed_at) {
  // Per optimizer step, its last micro-batch (the one right before the step; batches a resume skips by hand are
  // consumed before it) and whether the step opened an epoch.
  std::map<int64_t, const ConsumedBatch*> last;
  std::map<int64_t, bool> opens_epoch;
  for (const ConsumedBatch& b : straight) {
    last[b.step] = &b;
    if (!opens_epoch.count(b.step)) opens_epoch[b.step] = b.batch == 0;
  }
  const ConsumedBatch* first = nullptr;
  for (const ConsumedBatch& b : resumed)
    if (b.step == 0) first = &b;
  if (!first || !last.count(resumed_at)) return {};
  auto same = [&](const ConsumedBatch& a) {
    return a.indices == first->indices &&
           (!a.sampler_epoch || !first->sampler_epoch || a.sampler_epoch == first->sampler_epoch);
  };
  if (same(*last[resumed_at])) return {};
  int64_t found = -1;
  for (const auto& [step, b] : last)
    if (same(*b) && (found < 0 || std::llabs(step - resumed_at) < std::llabs(found - resumed_at))) found = step;
  const std::string at = "the resumed run's first step (step " + std::to_string(resumed_at) + ") trains on ";
  if (found < 0) return at + "a batch the straight run never trained on (another data order after resuming)";
  const std::string batches = "the batches of step " + std::to_string(found);
  // The epoch that ended last before the resume point began at this step: repeating it is what an off-by-one epoch
  // counter does, and also what a shuffle that restarts with the process does after an epoch-end checkpoint.
  int64_t saved_epoch_start = -1;
  for (const auto& [step, opens] : opens_epoch)
    if (opens && step < resumed_at) saved_epoch_start = step;
  const char* restarts =
      "the loader's shuffle restarts with the process (its order is not a function of the epoch: "
      "DistributedSampler.set_epoch, accelerate's use_seedable_sampler)";
  if (found < resumed_at && opens_epoch[found] && found == saved_epoch_start)
    return at + batches + ": the saved epoch's data order is trained again: the checkpoint's epoch is off by one, or " +
           restarts;
  if (found < resumed_at && opens_epoch[found])
    return at + batches + ": the data order of an earlier epoch comes back: " + restarts;
  if (found < resumed_at)
    return at + batches + ": the batches of " + std::to_string(resumed_at - found) +
           " step(s) are trained again (the checkpoint's position is off by one?)";
  return at + batches + ": it skips the batches of " + std::to_string(found - resumed_at) + " step(s)";
}

std::string resume_point_difference(const std::vector<records::resume_points>& straight,
                                    const std::vector<records::resume_points>& resumed, int after_save,
                                    bool& compared) {
  auto point = [](const std::vector<records::resume_points>& lines, int save) -> const records::resume_points* {
    for (const auto& l : lines)
      if (l.after_save == save) return &l;
    return nullptr;
  };
  const records::resume_points* a = point(straight, after_save);
  const records::resume_points* b = point(resumed, 0);
  compared = a && b;
  if (!compared) return {};
  const std::map<std::string, std::string> theirs(b->items.begin(), b->items.end());
  for (const auto& [name, hash] : a->items) {
    auto found = theirs.find(name);
    if (found == theirs.end()) return name + " (missing after resuming)";
    if (found->second != hash) return name;
  }
  return {};
}

NumericsEvidence numerics_step(int64_t step, int rank, const std::vector<TensorCompare>& activations,
                               const std::vector<std::string>& layer_kinds, bool samples_follow_rule) {
  NumericsEvidence ev;
  ev.step = step;
  ev.rank = rank;
  ev.activations = activations;
  ev.layer_kinds = layer_kinds;
  ev.samples_follow_rule = samples_follow_rule;
  return ev;
}

MicroComm micro_comm(const records::micro_collectives& l) {
  MicroComm m;
  m.step = l.step;
  m.micro = static_cast<int>(l.micro);
  m.collectives = l.collectives ? static_cast<int>(*l.collectives) : -1;  // -1: not counted (no comm hook)
  m.sync_flag = l.sync_flag.value_or(true);  // a model without the flag syncs every backward
  return m;
}

NoSyncEvidence no_sync_from_trace(const RunTrace& run, int accum, size_t buckets, uint64_t param_bytes) {
  NoSyncEvidence e;
  if (run.ranks.empty()) {
    e.failure = "no traces (the check run must record)";
    return e;
  }
  e.buckets = buckets;
  e.param_bytes = param_bytes;
  e.counted_how = "counted from the trace's allreduce spans";
  for (const auto& r : run.ranks) {
    std::set<uint32_t> steps;
    std::map<std::pair<uint32_t, int>, int> per_micro;            // (step, micro) -> allreduces
    std::map<uint32_t, std::map<uint16_t, int>> per_step_bucket;  // step -> bucket -> allreduces
    std::map<uint32_t, uint64_t> bytes;
    for (const auto& ev : r.events) {
      if (!ev.is_span()) continue;
      if (ev.stage_id() == Stage::step) steps.insert(ev.step);
      if (ev.stage_id() != Stage::allreduce) continue;
      per_micro[{ev.step, ev.micro}]++;
      per_step_bucket[ev.step][ev.bucket]++;
      bytes[ev.step] += ev.value;
    }
    std::vector<MicroComm> micros;
    std::vector<StepVolume> volumes;
    for (uint32_t s : steps) {
      for (int m = 0; m < accum; ++m) {
        MicroComm c;
        c.step = s;
        c.micro = m;
        auto it = per_micro.find({s, m});
        c.collectives = it == per_micro.end() ? 0 : it->second;
        micros.push_back(c);
      }
      StepVolume v;
      v.step = s;
      v.buckets_reduced = per_step_bucket[s].size();
      for (const auto& [b, n] : per_step_bucket[s]) v.each_bucket_once = v.each_bucket_once && n == 1;
      v.bytes = bytes[s];
      volumes.push_back(v);
    }
    e.per_rank.push_back(std::move(micros));
    e.volumes.push_back(std::move(volumes));
  }
  return e;
}

std::vector<RankResume> compare_final_states(const std::vector<std::map<std::string, std::string>>& straight,
                                             const std::vector<std::map<std::string, std::string>>& resumed) {
  std::vector<RankResume> out;
  for (size_t r = 0; r < straight.size(); ++r) {
    RankResume rr;
    rr.rank = static_cast<int>(r);
    if (r >= resumed.size() || resumed[r].empty()) {
      rr.recorded = false;
      out.push_back(rr);
      continue;
    }
    for (const auto& [name, hash] : straight[r]) {
      auto it = resumed[r].find(name);
      if (it == resumed[r].end() || it->second != hash) {
        rr.first_difference = name;
        rr.difference = it == resumed[r].end() ? "exists in the straight run but not after resuming" : "differs";
        break;
      }
      ++rr.items;
    }
    out.push_back(rr);
  }
  return out;
}

std::map<std::string, std::string> final_state_of(const std::vector<records::final_state>& lines) {
  std::map<std::string, std::string> out;
  for (const auto& l : lines) out[l.name] = l.hash;
  return out;
}

bool export_fault_run_traces(const std::string& run_folder, int world, std::string& error) {
  RunTrace run;
  if (!load_run(run_folder, run, error)) return false;
  if (run.ranks.size() != static_cast<size_t>(world)) {
    error = "a rank's trace is missing (" + std::to_string(run.ranks.size()) + " of " + std::to_string(world) + ")";
    return false;
  }
  ExportStats st;
  return export_chrome(run, in_run(run_folder, kChromeTraceFile), st, error);
}

}  // namespace ddp
