#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/common/manifest.h"
#include "runtime/verify/checks.h"
#include "traces/model/stages.h"
#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"
#include "traces/base/text_format.h"

namespace ddp {

const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::pass: return "pass";
    case CheckStatus::warn: return "warn";
    case CheckStatus::fail: return "fail";
    case CheckStatus::skip: return "skip";
  }
  return "?";
}

CheckResult check_result(const std::string& id, CheckStatus s, std::string summary, nlohmann::json details) {
  CheckResult r;
  r.id = id;
  r.status = s;
  r.summary = std::move(summary);
  r.details = std::move(details);
  return r;
}

CheckResult check_manifest(const nlohmann::json& m) {
  const std::vector<std::string>& required = manifest_required_fields();
  std::vector<std::string> missing;
  if (!m.is_object()) return check_result("env.manifest", CheckStatus::fail, "manifest.json is missing or not valid JSON");
  for (const auto& p : required)
    if (!m.contains(nlohmann::json::json_pointer(p))) missing.push_back(p.substr(1));
  if (m.contains("ranks") && m["ranks"].is_array()) {
    if (m.contains("world_size") && m["ranks"].size() != m["world_size"].get<size_t>())
      missing.push_back("ranks (" + std::to_string(m["ranks"].size()) + " of " + m["world_size"].dump() + ")");
    for (const auto& r : m["ranks"]) {
      std::string who = "ranks[" + r.value("rank", nlohmann::json(-1)).dump() + "]";
      for (const std::string& k : manifest_rank_required_fields())
        if (!r.contains(nlohmann::json::json_pointer(k))) missing.push_back(who + k);
    }
  }
  nlohmann::json d = {{"required", required}, {"missing", missing}};
  if (!missing.empty())
    return check_result("env.manifest", CheckStatus::fail,
                "manifest lacks " + std::to_string(missing.size()) + " field(s), first: " + missing.front() +
                    " (a run that crashed before the end has only the start-time manifest)",
                d);
  std::string s = "versions, device, backend " + m["backend"].get<std::string>() + ", world " + m["world_size"].dump() +
                  ", launch " + m["launch"]["method"].get<std::string>() + ", seeds, batch shapes " +
                  m["ranks"][0]["batch"]["x"]["shape"].dump() + " " + m["ranks"][0]["batch"]["x"]["dtype"].get<std::string>() +
                  ", config: all present";
  return check_result("env.manifest", CheckStatus::pass, s, d);
}

std::vector<ConsumedBatch> read_consumed(const std::string& run_dir, int rank, std::string& error) {
  std::vector<ConsumedBatch> out;
  std::string path = in_run(run_dir, verify_samples_file(rank));
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path + " (run with --verify-steps)";
    return out;
  }
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      error = path + ": a line is not valid JSON";
      return {};
    }
    out.push_back({j["epoch"], j["step"], j["micro"], j["batch"], j["indices"].get<std::vector<int64_t>>()});
  }
  return out;
}

CheckResult check_shard_rule(const std::vector<std::vector<ConsumedBatch>>& per_rank, int64_t n, bool shuffle,
                             const std::function<std::vector<int64_t>(int, int)>& expected) {
  const int world = static_cast<int>(per_rank.size());
  std::set<int> epochs;
  for (const auto& r : per_rank)
    for (const auto& b : r) epochs.insert(b.epoch);
  if (epochs.empty()) return check_result("data.shard_rule", CheckStatus::fail, "no consumed batches were logged");
  nlohmann::json per_epoch = nlohmann::json::array();
  std::string first_problem;
  std::map<int, std::vector<int64_t>> rank0_order;
  for (int e : epochs) {
    std::vector<std::vector<int64_t>> got(world);
    for (int r = 0; r < world; ++r)
      for (const auto& b : per_rank[r])
        if (b.epoch == e) got[r].insert(got[r].end(), b.indices.begin(), b.indices.end());
    rank0_order[e] = got[0];
    std::map<int64_t, int> owners;
    for (int r = 0; r < world; ++r)
      for (int64_t i : std::set<int64_t>(got[r].begin(), got[r].end())) owners[i]++;
    int64_t dup = 0;
    for (auto& [i, c] : owners) dup += c > 1;
    int64_t missing = n - static_cast<int64_t>(owners.size());
    // What the rule assigns, cut to what the ranks ran (a run may stop early with --max-steps).
    std::vector<std::vector<int64_t>> want(world);
    std::map<int64_t, int> want_owners;
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      want[r] = expected(e, r);
      want[r].resize(std::min(want[r].size(), got[r].size()));
      for (int64_t i : std::set<int64_t>(want[r].begin(), want[r].end())) want_owners[i]++;
      size_t mism = 0, first = SIZE_MAX;
      for (size_t k = 0; k < got[r].size(); ++k)
        if (k >= want[r].size() || got[r][k] != want[r][k]) {
          ++mism;
          if (first == SIZE_MAX) first = k;
        }
      std::set<int64_t> mine(got[r].begin(), got[r].end());
      int64_t dups_here = 0;
      for (int64_t i : mine) dups_here += owners[i] > 1;
      ranks.push_back({{"rank", r}, {"consumed", got[r].size()}, {"shared_with_other_ranks", dups_here},
                       {"mismatches_vs_rule", mism}});
      if (mism && first_problem.empty())
        first_problem = "epoch " + std::to_string(e) + ", rank " + std::to_string(r) + ": " + std::to_string(mism) +
                        " of " + std::to_string(got[r].size()) + " indices differ from the sampler rule, first at position " +
                        std::to_string(first) + " (got " + std::to_string(got[r][first]) + ", rule says " +
                        (first < want[r].size() ? std::to_string(want[r][first]) : std::string("nothing")) + ")";
    }
    int64_t want_dup = 0;
    for (auto& [i, c] : want_owners) want_dup += c > 1;
    int64_t want_missing = n - static_cast<int64_t>(want_owners.size());
    if (dup > want_dup && first_problem.empty())
      first_problem = "epoch " + std::to_string(e) + ": " + std::to_string(dup) + " indices on more than one rank, the padding explains " +
                      std::to_string(want_dup);
    per_epoch.push_back({{"epoch", e}, {"duplicates", dup}, {"allowed_duplicates", want_dup}, {"missing", missing},
                         {"allowed_missing", want_missing}, {"ranks", ranks}});
  }
  bool reshuffled = true;
  if (shuffle && rank0_order.size() >= 2) {
    auto it = rank0_order.begin();
    const auto& a = it->second;
    const auto& b = std::next(it)->second;
    size_t k = std::min(a.size(), b.size());
    reshuffled = !std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), b.begin());
  }
  nlohmann::json d = {{"epochs", per_epoch}, {"order_differs_between_epochs", reshuffled}};
  if (!reshuffled)
    return check_result("data.shard_rule", CheckStatus::fail,
                "rank 0 saw the same order in epochs " + std::to_string(rank0_order.begin()->first) + " and " +
                    std::to_string(std::next(rank0_order.begin())->first) + ": set_epoch was not applied",
                d);
  if (!first_problem.empty())
    return check_result("data.shard_rule", CheckStatus::fail, first_problem + " (a rank is reading another rank's shard?)", d);
  const auto& e0 = per_epoch[0];
  return check_result("data.shard_rule", CheckStatus::pass,
              std::to_string(epochs.size()) + " epoch(s), " + std::to_string(world) +
                  " ranks follow DistributedSampler exactly; epoch " + e0["epoch"].dump() + ": " + e0["duplicates"].dump() +
                  " shared (padding), " + e0["missing"].dump() + " unused (drop_last/partial batches)" +
                  (shuffle ? ", order reshuffled each epoch" : ""),
              d);
}

std::map<int64_t, std::string> read_replica_hashes(const std::string& run_dir, int rank, std::string& error) {
  std::map<int64_t, std::string> out;
  std::string path = in_run(run_dir, verify_replicas_file(rank));
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return out;
  }
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out[j["step"].get<int64_t>()] = j["param_hash"];
  }
  return out;
}

CheckResult check_rank_sync(const std::vector<std::map<int64_t, std::string>>& h) {
  if (h.size() < 2) return check_result("numerics.rank_sync", CheckStatus::skip, "one rank: nothing to compare");
  size_t compared = 0;
  for (const auto& [step, hash] : h[0]) {
    for (size_t r = 1; r < h.size(); ++r) {
      auto it = h[r].find(step);
      if (it == h[r].end()) continue;
      ++compared;
      if (it->second != hash) {
        std::string when = step < 0 ? "at start (after the initial broadcast)" : "after optimizer step " + std::to_string(step);
        return check_result("numerics.rank_sync", CheckStatus::fail,
                    "rank " + std::to_string(r) + "'s parameters differ from rank 0's " + when +
                        " (hash " + it->second + " vs " + hash + "): gradients were not synchronised or ranks ran different updates",
                    {{"first_step", step}, {"rank", r}});
      }
    }
  }
  if (compared == 0) return check_result("numerics.rank_sync", CheckStatus::fail, "no parameter hashes to compare");
  return check_result("numerics.rank_sync", CheckStatus::pass,
              "parameters bitwise identical on all ranks at start and after each of " + std::to_string(h[0].size() - 1) +
                  " optimizer steps (" + std::to_string(compared) + " hash comparisons)",
              {{"comparisons", compared}});
}

CheckResult check_no_sync(const RunTrace& run, int accum, size_t buckets, uint64_t param_bytes) {
  if (run.ranks.empty()) return check_result("comm.no_sync", CheckStatus::fail, "no traces (the check run must record)");
  nlohmann::json ranks = nlohmann::json::array();
  std::string problem;
  for (const auto& r : run.ranks) {
    std::map<uint32_t, std::map<uint16_t, int>> per_step_bucket;  // step -> bucket -> allreduces
    std::map<uint32_t, uint64_t> bytes;
    std::set<uint32_t> steps;
    size_t early = 0;
    for (const auto& e : r.events) {
      if (!e.is_span()) continue;
      if (e.stage_id() == Stage::step) steps.insert(e.step);
      if (e.stage_id() != Stage::allreduce) continue;
      if (e.micro != accum - 1) {
        ++early;
        if (problem.empty())
          problem = "rank " + std::to_string(r.rank) + " reduced bucket " + std::to_string(e.bucket) + " on micro-step " +
                    std::to_string(e.micro) + " of step " + std::to_string(e.step) +
                    ": no_sync was not in effect (gradient accumulation communicates every micro-step)";
      }
      per_step_bucket[e.step][e.bucket]++;
      bytes[e.step] += e.value;
    }
    for (uint32_t s : steps) {
      const auto& m = per_step_bucket[s];
      bool once = m.size() == buckets;
      for (auto& [b, c] : m) once &= c == 1;
      if (!once && problem.empty())
        problem = "rank " + std::to_string(r.rank) + " step " + std::to_string(s) + ": " + std::to_string(m.size()) +
                  " of " + std::to_string(buckets) + " buckets reduced, each must be exactly once";
      if (once && bytes[s] != param_bytes && problem.empty())
        problem = "rank " + std::to_string(r.rank) + " step " + std::to_string(s) + " reduced " + std::to_string(bytes[s]) +
                  " bytes, the parameters hold " + std::to_string(param_bytes);
    }
    uint64_t per_step = steps.empty() ? 0 : bytes.empty() ? 0 : bytes.begin()->second;
    ranks.push_back({{"rank", r.rank}, {"optimizer_steps", steps.size()}, {"allreduces_on_no_sync_micro_steps", early},
                     {"bytes_per_step", per_step}});
  }
  nlohmann::json d = {{"accum_steps", accum}, {"buckets", buckets}, {"param_bytes", param_bytes}, {"ranks", ranks}};
  if (!problem.empty()) return check_result("comm.no_sync", CheckStatus::fail, problem, d);
  return check_result("comm.no_sync", CheckStatus::pass,
              "accum_steps=" + std::to_string(accum) + ": micro-steps 0.." + std::to_string(accum - 2 < 0 ? 0 : accum - 2) +
                  (accum > 1 ? " issued no allreduce; " : " (none); ") + "the last reduced each of " + std::to_string(buckets) +
                  " bucket(s) once, " + ranks[0]["bytes_per_step"].dump() + " bytes per optimizer step = parameter bytes " +
                  std::to_string(param_bytes),
              d);
}

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
  for (double r : ref) largest = std::max(largest, std::fabs(r));
  double gr = 0, rr = 0, worst_excess = -INFINITY;
  for (size_t i = 0; i < got.size(); ++i) {
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
  return c;
}

CheckResult judge_numerics(const std::vector<NumericsEvidence>& steps, int world, double rtol, double atol) {
  nlohmann::json d = {{"rtol", rtol}, {"atol", atol}, {"steps", nlohmann::json::array()}};
  size_t compared = 0;
  for (const auto& s : steps) {
    nlohmann::json sj = {{"step", s.step}, {"rank", s.rank}, {"grads", nlohmann::json::array()}, {"activations", nlohmann::json::array()}};
    for (const auto& g : s.grads)
      sj["grads"].push_back({{"name", g.name}, {"max_abs_diff", g.max_abs_diff}, {"allowed", g.max_allowed}, {"scale", g.scale}, {"ok", g.ok}});
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
    std::string where = "step " + std::to_string(s.step) + ", rank " + std::to_string(s.rank) + ", first at " + bad->name +
                        ": max |diff| " + fmt("%.3g", bad->max_abs_diff) + " > allowed " + fmt("%.3g", bad->max_allowed) +
                        ", ratio to reference " + fmt("%.4g", bad->scale);
    std::string cause;
    auto first_act = std::find_if(s.activations.begin(), s.activations.end(), [](const TensorCompare& c) { return !c.ok; });
    if (!s.samples_follow_rule)
      cause = "a rank saw other samples than the sampler rule assigns (see data.shard_rule)";
    else if (std::fabs(bad->scale * world - 1) < 0.02)
      cause = "gradients are 1/" + std::to_string(world) +
              " of the single-process gradient: a sum-reduced loss, averaged across ranks (use mean, or scale by the world size)";
    else if (std::fabs(bad->scale / world - 1) < 0.02)
      cause = "gradients are " + std::to_string(world) + "x the single-process gradient: summed, not averaged, across ranks";
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
    return check_result("numerics.reference", CheckStatus::fail, where + ". Likely cause: " + cause, d);
  }
  if (compared == 0) return check_result("numerics.reference", CheckStatus::fail, "no gradients were compared", d);
  return check_result("numerics.reference", CheckStatus::pass,
              "synced gradients match a single-rank reference on the union of the ranks' samples for " +
                  std::to_string(steps.size() / std::max(world, 1)) + " step(s) x " + std::to_string(world) + " ranks, " +
                  std::to_string(compared) + " tensors within rtol " + fmt("%.2g", rtol) + ", atol " + fmt("%.2g", atol),
              d);
}

CheckResult check_checkpoint_items(const std::vector<std::string>& expected, const std::vector<std::string>& found,
                                   const std::string& file) {
  std::set<std::string> have(found.begin(), found.end());
  std::vector<std::string> missing;
  for (const auto& e : expected)
    if (!have.count(e)) missing.push_back(e);
  nlohmann::json d = {{"file", file}, {"expected", expected.size()}, {"found", found.size()}, {"missing", missing}};
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 4; ++i) list += (i ? ", " : "") + missing[i];
    return check_result("checkpoint.complete", CheckStatus::fail,
                std::to_string(missing.size()) + " item(s) the live run holds are not in " + file + ": " + list +
                    (missing.size() > 4 ? ", ..." : "") + " (a resume would not be exact)",
                d);
  }
  return check_result("checkpoint.complete", CheckStatus::pass,
              "all " + std::to_string(expected.size()) +
                  " items present (model, AdamW moments and step counts, loss scaler, epoch/step/sampler position, RNG "
                  "states); written atomically with a verified CRC-32",
              d);
}

CheckResult judge_faults(const std::vector<FaultScenario>& scenarios) {
  nlohmann::json d = nlohmann::json::array();
  std::string problem, times;
  for (const auto& s : scenarios) {
    const RunOutcome& o = s.outcome;
    double worst = 0;
    for (const auto& r : o.ranks) worst = std::max(worst, r.ended_after_fault_s);
    double limit = s.kind == "hang" ? 10.0 : 5.0;  // hang: from the last progress
    std::string step_text = "step " + std::to_string(s.step);
    bool named = o.message.find("rank " + std::to_string(s.rank)) != std::string::npos;
    bool has_step = o.message.find(step_text) != std::string::npos;
    bool has_stage = false;
    for (int i = 0; i < kStageCount; ++i)
      has_stage |= o.message.find(std::string(stage_name(static_cast<Stage>(i)))) != std::string::npos;
    has_stage |= o.message.find("startup") != std::string::npos;
    d.push_back({{"kind", s.kind}, {"exit_code", o.exit_code}, {"culprit", o.culprit}, {"message", o.message},
                 {"slowest_exit_after_fault_s", worst}, {"limit_s", limit}, {"traces_export", s.traces_export}});
    times += (times.empty() ? "" : ", ") + s.kind + " " + fmt("%.2f s", worst);
    if (!problem.empty()) continue;
    if (o.exit_code != 1) problem = s.kind + ": supervisor exited " + std::to_string(o.exit_code) + ", expected 1";
    else if (o.culprit != s.rank || !named) problem = s.kind + ": the failing rank " + std::to_string(s.rank) + " was not named (" + o.message + ")";
    else if (!has_step || !has_stage) problem = s.kind + ": the message lacks the step or stage (" + o.message + ")";
    else if (worst > limit) problem = s.kind + ": a rank took " + fmt("%.2f", worst) + " s to end, limit " + fmt("%.0f", limit) + " s";
    else if (!s.traces_export) problem = s.kind + ": traces did not export: " + s.export_error;
  }
  if (!problem.empty()) return check_result("faults.exit", CheckStatus::fail, problem, d);
  return check_result("faults.exit", CheckStatus::pass,
              std::to_string(scenarios.size()) + " injected faults each ended every rank in time, exit 1, culprit, step and stage named, traces exported (" +
                  times + ")",
              d);
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

nlohmann::json checks_json(const std::vector<CheckResult>& results) {
  nlohmann::json a = nlohmann::json::array();
  int fails = 0;
  for (const auto& r : results) {
    a.push_back({{"id", r.id}, {"status", status_name(r.status)}, {"summary", r.summary}, {"details", r.details}});
    fails += r.status == CheckStatus::fail;
  }
  return {{"checks", a}, {"failed", fails}, {"passed", fails == 0}};
}

std::string checks_table(const std::vector<CheckResult>& results) {
  std::ostringstream o;
  for (const auto& r : results) {
    char head[64];
    std::snprintf(head, sizeof(head), "%-20s %-4s  ", r.id.c_str(), status_name(r.status));
    o << head << r.summary << "\n";
  }
  return o.str();
}

}  // namespace ddp
