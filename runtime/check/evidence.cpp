#include "runtime/check/evidence.h"

#include <cstdlib>
#include <map>
#include <set>

#include "traces/base/json_lines.h"
#include "traces/chrome/chrome_export.h"
#include "traces/native/load_run.h"
#include "traces/model/run_folder.h"
#include "traces/model/stages.h"

namespace ddp {

std::vector<ConsumedBatch> read_consumed(const std::string& run_dir, int rank, std::string& error) {
  std::vector<nlohmann::json> lines;
  const std::string path = in_run(run_dir, verify_samples_file(rank));
  if (!read_json_lines_strict(path, lines, error)) return {};
  std::vector<ConsumedBatch> out;
  for (const auto& j : lines) {
    if (!j.contains("indices") || !j["indices"].is_array()) {
      error = path + ": a line has no indices";
      return {};
    }
    out.push_back({j.value("epoch", 0), j.value("step", int64_t{0}), j.value("micro", 0), j.value("batch", int64_t{0}),
                   j["indices"].get<std::vector<int64_t>>(),
                   j.contains("sampler_epoch") && j["sampler_epoch"].is_number_integer()
                       ? j["sampler_epoch"].get<int64_t>()
                       : -1});
  }
  return out;
}

std::map<int64_t, std::string> read_replica_hashes(const std::string& run_dir, int rank, std::string& error) {
  std::vector<nlohmann::json> lines;
  std::map<int64_t, std::string> out;
  if (!read_json_lines_strict(in_run(run_dir, verify_replicas_file(rank)), lines, error)) return out;
  for (const auto& j : lines)
    if (j.contains("step") && j["step"].is_number_integer() && j.contains("param_hash") && j["param_hash"].is_string())
      out[j["step"].get<int64_t>()] = j["param_hash"];
  return out;
}

std::vector<TrainingStep> parse_training_steps(const std::vector<nlohmann::json>& lines) {
  auto names = [](const nlohmann::json& j, const char* k) {
    std::vector<std::string> out;
    if (j.contains(k) && j[k].is_array())
      for (const auto& v : j[k])
        if (v.is_string()) out.push_back(v);
    return out;
  };
  std::vector<TrainingStep> out;
  for (const auto& j : lines) {
    TrainingStep t;
    t.step = j.value("step", int64_t{0});
    t.params = j.value("params", 0);
    t.forwards = j.value("forwards", 0);
    t.output_finite = j.value("output_finite", true);
    t.model_in_eval = j.value("model_in_eval", false);
    t.eval_modules = names(j, "eval_modules");
    t.grad_zero = names(j, "grad_zero");
    t.grad_nonfinite = names(j, "grad_nonfinite");
    t.grad_none = names(j, "grad_none");
    t.verified = j.contains("unchanged") && j["unchanged"].is_array();
    t.unchanged = names(j, "unchanged");
    if (j.contains("lrs") && j["lrs"].is_array())
      for (const auto& v : j["lrs"])
        if (v.is_number()) t.lrs.push_back(v.get<double>());
    if (j.contains("scheduler_steps") && j["scheduler_steps"].is_number_integer())
      t.scheduler_steps = j["scheduler_steps"].get<int64_t>();
    if (j.contains("first_nonfinite_layer") && j["first_nonfinite_layer"].is_object()) {
      const auto& f = j["first_nonfinite_layer"];
      t.first_nonfinite_layer = f.contains("layer") && f["layer"].is_string() ? f["layer"].get<std::string>() : "";
    }
    t.rss = j.value("rss", int64_t{0});
    t.cuda_allocated = j.contains("cuda_allocated") && j["cuda_allocated"].is_number_integer()
                           ? j["cuda_allocated"].get<int64_t>()
                           : -1;
    out.push_back(std::move(t));
  }
  return out;
}

TrainingEvidence read_training(const std::string& run_dir, int world) {
  TrainingEvidence e;
  for (int r = 0; r < world; ++r) {
    std::vector<nlohmann::json> lines;
    if (!read_json_lines_strict(in_run(run_dir, verify_log_file(r, kVerifyTraining)), lines, e.failure)) {
      e.per_rank.clear();
      return e;
    }
    e.per_rank.push_back(parse_training_steps(lines));
  }
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
           (a.sampler_epoch < 0 || first->sampler_epoch < 0 || a.sampler_epoch == first->sampler_epoch);
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

std::string resume_point_difference(const std::vector<nlohmann::json>& straight, const std::vector<nlohmann::json>& resumed,
                                    int after_save, bool& compared) {
  auto point = [](const std::vector<nlohmann::json>& lines, int save) -> const nlohmann::json* {
    for (const auto& l : lines)
      if (l.value("after_save", -1) == save && l.contains("items") && l["items"].is_array()) return &l;
    return nullptr;
  };
  const nlohmann::json* a = point(straight, after_save);
  const nlohmann::json* b = point(resumed, 0);
  compared = a && b;
  if (!compared) return {};
  std::map<std::string, std::string> theirs;
  for (const auto& it : (*b)["items"])
    if (it.is_array() && it.size() == 2 && it[0].is_string() && it[1].is_string()) theirs[it[0]] = it[1];
  for (const auto& it : (*a)["items"]) {
    if (!it.is_array() || it.size() != 2 || !it[0].is_string() || !it[1].is_string()) continue;
    auto found = theirs.find(it[0]);
    if (found == theirs.end()) return it[0].get<std::string>() + " (missing after resuming)";
    if (found->second != it[1]) return it[0];
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

std::vector<MicroComm> parse_micro_comm(const std::vector<nlohmann::json>& lines) {
  std::vector<MicroComm> out;
  for (const auto& j : lines) {
    MicroComm m;
    m.step = j.value("step", int64_t{0});
    m.micro = j.value("micro", 0);
    m.collectives =
        j.contains("collectives") && j["collectives"].is_number_integer() ? j["collectives"].get<int>() : -1;
    m.sync_flag = j.value("sync_flag", true);
    out.push_back(m);
  }
  return out;
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
    std::map<std::pair<uint32_t, int>, int> per_micro;                 // (step, micro) -> allreduces
    std::map<uint32_t, std::map<uint16_t, int>> per_step_bucket;        // step -> bucket -> allreduces
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

std::map<std::string, std::string> parse_final_state(const std::vector<nlohmann::json>& lines) {
  std::map<std::string, std::string> out;
  for (const auto& j : lines)
    if (j.contains("name") && j["name"].is_string()) out[j["name"]] = j.value("hash", std::string());
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
