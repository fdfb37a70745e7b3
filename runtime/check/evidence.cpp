#include "runtime/check/evidence.h"

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
                   j["indices"].get<std::vector<int64_t>>()});
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
