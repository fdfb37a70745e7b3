#include "traces/run_diff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <tuple>

#include "traces/text_format.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {

// ---- reading ---------------------------------------------------------------------------------------------------

// Files verify/rank<R>.<what>.jsonl, by rank.
std::map<int, fs::path> verify_files(const fs::path& dir, const std::string& what) {
  std::map<int, fs::path> out;
  std::error_code ec;
  fs::path vdir = dir / "verify";
  if (!fs::is_directory(vdir, ec)) return out;
  const std::regex re("rank(\\d+)\\." + what + "\\.jsonl");
  for (const auto& entry : fs::directory_iterator(vdir, ec)) {
    std::smatch m;
    std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, re)) out[std::stoi(m[1].str())] = entry.path();
  }
  return out;
}

// Calls `line_fn(json)` for every parseable line; counts the others into `problems`.
template <class F>
void read_jsonl(const fs::path& path, std::vector<std::string>& problems, F line_fn) {
  std::ifstream in(path);
  if (!in) {
    problems.push_back("cannot read " + path.string());
    return;
  }
  std::string line;
  size_t bad = 0, lineno = 0, first_bad = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !line_fn(j)) {
      if (!bad++) first_bad = lineno;
      continue;
    }
  }
  if (bad)
    problems.push_back(path.filename().string() + ": " + std::to_string(bad) + " unreadable line(s), first at line " +
                       std::to_string(first_bad));
}

bool has_rank_trace(const fs::path& dir) {
  static const std::regex kRankFile(R"(rank(\d+)\.ddpt)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (std::regex_match(entry.path().filename().string(), kRankFile)) return true;
  return false;
}

// ---- numbers ---------------------------------------------------------------------------------------------------

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

nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json delta_json(const Delta& d) {
  nlohmann::json j = {{"a", opt_json(d.a)}, {"b", opt_json(d.b)}, {"delta", nullptr}, {"delta_pct", nullptr}};
  if (d.a && d.b) {
    j["delta"] = *d.b - *d.a;
    if (*d.a != 0) j["delta_pct"] = 100.0 * (*d.b - *d.a) / *d.a;
  }
  return j;
}

// ---- config ----------------------------------------------------------------------------------------------------

void flatten_into(const nlohmann::json& j, const std::string& prefix, std::map<std::string, nlohmann::json>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten_into(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j;
  }
}

std::string variable_of(const std::string& key) {
  for (const auto& v : distributed_variables())
    for (const char* k : v.keys) {
      std::string ks(k);
      // "seeds" covers "seeds.data", "seeds.weights", ...
      if (key == ks || (key.size() > ks.size() && key.compare(0, ks.size(), ks) == 0 && key[ks.size()] == '.'))
        return v.name;
    }
  return {};
}

// ---- timing ----------------------------------------------------------------------------------------------------

struct RankTiming {
  std::optional<double> step_median_ms, steps;
  std::array<std::optional<double>, kStageCount> per_step_ms{};
};

std::map<int, RankTiming> timing_from_traces(const DiffRun& r) {
  std::map<int, RankTiming> out;
  for (const RankSummary& s : r.traces) {
    RankTiming t;
    t.step_median_ms = s.step_median_ms;
    t.steps = static_cast<double>(s.steps);
    for (int i = 0; i < kStageCount; ++i)
      if (s.stages[i].count)
        t.per_step_ms[i] =
            static_cast<double>(s.stages[i].total_ns) / 1e6 / static_cast<double>(std::max<uint64_t>(s.steps, 1));
    out[static_cast<int>(s.rank)] = t;
  }
  return out;
}

std::map<int, RankTiming> timing_from_manifest(const DiffRun& r) {
  std::map<int, RankTiming> out;
  if (!r.manifest.is_object()) return out;
  auto it = r.manifest.find("ranks");
  if (it == r.manifest.end() || !it->is_array()) return out;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& rk = (*it)[i];
    if (!rk.is_object()) continue;
    int rank = rk.contains("rank") && rk["rank"].is_number_integer() ? rk["rank"].get<int>() : static_cast<int>(i);
    RankTiming t;
    if (rk.contains("step_time_median_ms") && rk["step_time_median_ms"].is_number())
      t.step_median_ms = rk["step_time_median_ms"].get<double>();
    if (rk.contains("steps") && rk["steps"].is_number()) t.steps = rk["steps"].get<double>();
    if (t.step_median_ms) out[rank] = t;
  }
  return out;
}

std::optional<double> mean_of(const std::map<int, RankTiming>& m, std::optional<double> RankTiming::*field) {
  double sum = 0;
  int n = 0;
  for (const auto& [rank, t] : m)
    if (t.*field) {
      sum += *(t.*field);
      ++n;
    }
  if (!n) return std::nullopt;
  return sum / n;
}

std::optional<double> mean_stage(const std::map<int, RankTiming>& m, int stage) {
  double sum = 0;
  int n = 0;
  for (const auto& [rank, t] : m) {
    sum += t.per_step_ms[stage].value_or(0.0);  // a rank without spans of the stage spent no time in it
    ++n;
    (void)rank;
  }
  bool any = false;
  for (const auto& [rank, t] : m) any = any || t.per_step_ms[stage].has_value();
  if (!any || !n) return std::nullopt;
  return sum / n;
}

TimingBlock block(const std::optional<RankTiming>& a, const std::optional<RankTiming>& b, bool stages) {
  TimingBlock out;
  if (a) out.step_median_ms.a = a->step_median_ms, out.steps.a = a->steps;
  if (b) out.step_median_ms.b = b->step_median_ms, out.steps.b = b->steps;
  if (!stages) return out;
  for (int i = 0; i < kStageCount; ++i) {
    std::optional<double> va = a ? a->per_step_ms[i] : std::nullopt;
    std::optional<double> vb = b ? b->per_step_ms[i] : std::nullopt;
    if (!va && !vb) continue;
    // A stage seen in one run only took no time in the other (when that run has traces of that rank).
    if (!va && a) va = 0.0;
    if (!vb && b) vb = 0.0;
    out.stages.push_back({std::string(stage_name(static_cast<Stage>(i))), {va, vb}});
  }
  return out;
}

TimingDiff diff_timing(const DiffRun& a, const DiffRun& b) {
  TimingDiff out;
  std::map<int, RankTiming> ta, tb;
  bool stages = false;
  if (a.has_traces && b.has_traces) {
    out.source = "traces";
    ta = timing_from_traces(a);
    tb = timing_from_traces(b);
    stages = true;
  } else {
    ta = timing_from_manifest(a);
    tb = timing_from_manifest(b);
    out.source = ta.empty() && tb.empty() ? "none" : "manifest";
    out.note = std::string("no per-stage breakdown: ") +
               (!a.has_traces && !b.has_traces ? "neither run has rank traces"
                : !a.has_traces               ? "run A has no rank traces"
                                              : "run B has no rank traces") +
               (out.source == "none" ? ", and neither manifest has per-rank step times"
                                     : "; step medians from the manifests");
  }
  RankTiming ma, mb;
  ma.step_median_ms = mean_of(ta, &RankTiming::step_median_ms);
  ma.steps = mean_of(ta, &RankTiming::steps);
  mb.step_median_ms = mean_of(tb, &RankTiming::step_median_ms);
  mb.steps = mean_of(tb, &RankTiming::steps);
  for (int i = 0; i < kStageCount; ++i) {
    ma.per_step_ms[i] = mean_stage(ta, i);
    mb.per_step_ms[i] = mean_stage(tb, i);
  }
  out.mean = block(ta.empty() ? std::nullopt : std::optional<RankTiming>(ma),
                   tb.empty() ? std::nullopt : std::optional<RankTiming>(mb), stages);
  std::set<int> ranks;
  for (const auto& [r, t] : ta) ranks.insert(r);
  for (const auto& [r, t] : tb) ranks.insert(r);
  for (int r : ranks) {
    auto ia = ta.find(r);
    auto ib = tb.find(r);
    out.ranks[r] = block(ia == ta.end() ? std::nullopt : std::optional<RankTiming>(ia->second),
                         ib == tb.end() ? std::nullopt : std::optional<RankTiming>(ib->second), stages);
  }
  return out;
}

// ---- tensors ---------------------------------------------------------------------------------------------------

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
    std::string h = "the forward matched, the gradients differ: loss reduction, gradient averaging over ranks or the "
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

ReplicaDiff diff_replicas(const DiffRun& a, const DiffRun& b) {
  ReplicaDiff out;
  if (a.replicas.empty() || b.replicas.empty()) {
    out.note = a.replicas.empty() && b.replicas.empty() ? "neither run has replica hashes (run with --verify-steps N)"
               : a.replicas.empty()                     ? "run A has no replica hashes"
                                                        : "run B has no replica hashes";
    return out;
  }
  for (const auto& [rank, ra] : a.replicas) {
    auto ib = b.replicas.find(rank);
    if (ib == b.replicas.end()) continue;
    out.compared = true;
    std::map<int64_t, std::string> hb;
    for (const auto& r : ib->second) hb.emplace(r.step, r.hash);
    std::map<int64_t, std::string> ha;
    for (const auto& r : ra) ha.emplace(r.step, r.hash);
    ReplicaDifference rd;
    rd.rank = rank;
    for (const auto& [step, h] : ha) {  // std::map: ascending steps, -1 (after the broadcast) first
      auto it = hb.find(step);
      if (it == hb.end()) continue;
      rd.compared++;
      if (h != it->second && !rd.first_step) {
        rd.first_step = step;
        rd.hash_a = h;
        rd.hash_b = it->second;
      }
    }
    if (rd.first_step && (!out.first_step || *rd.first_step < *out.first_step)) out.first_step = rd.first_step;
    out.ranks.push_back(rd);
  }
  if (!out.compared) out.note = "the runs have replica hashes of different ranks";
  return out;
}

// ---- text ------------------------------------------------------------------------------------------------------

std::string short_json(const nlohmann::json& j) {
  if (j.is_null()) return "(absent)";
  std::string s = j.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string opt_ms(const std::optional<double>& v) {
  if (!v) return "         -";
  return fmt("%10.3f", *v);
}

std::string delta_cells(const Delta& d) {
  if (!d.a || !d.b) return "          -        -";
  double dd = *d.b - *d.a;
  std::string pct = *d.a != 0 ? fmt("%+7.1f%%", 100.0 * dd / *d.a) : std::string("       -");
  return fmt("%+10.3f", dd) + " " + pct;
}

std::string tensor_where(const TensorDivergence& d) {
  std::string s = "step " + std::to_string(d.step) + ", " + d.kind;
  if (d.micro >= 0 && d.kind == "activation") s += " (micro " + std::to_string(d.micro) + ")";
  return s + " " + d.name;
}

std::string stats_line(const nlohmann::json& s) {
  std::string out;
  for (const char* k : {"count", "mean", "std", "l2"}) {
    auto it = s.find(k);
    out += std::string(out.empty() ? "" : " ") + k + "=";
    if (it == s.end() || it->is_null()) out += (it == s.end() ? "-" : "nan");
    else if (std::string(k) == "count") out += it->dump();
    else out += fmt("%.6g", it->get<double>());
  }
  return out;
}

}  // namespace

// ---- public ----------------------------------------------------------------------------------------------------

const std::vector<DistributedVariable>& distributed_variables() {
  static const std::vector<DistributedVariable> kVars = {
      {"world size", {"world_size", "config.nproc"}},
      {"backend", {"backend", "config.backend"}},
      {"batch size", {"config.batch_size"}},
      {"accumulation steps", {"config.accum_steps"}},
      {"AMP", {"config.amp"}},
      {"bucket size", {"config.bucket_mb"}},
      {"seed", {"config.seed", "seeds"}},
      {"launch method", {"launch.method"}},
      {"workers", {"config.workers"}},
  };
  return kVars;
}

std::map<std::string, nlohmann::json> flatten_manifest(const nlohmann::json& manifest) {
  std::map<std::string, nlohmann::json> out;
  if (!manifest.is_object()) return out;
  static const std::set<std::string> kSkip = {"start_time", "end_time", "rank_hosts", "clock", "ranks"};
  for (auto it = manifest.begin(); it != manifest.end(); ++it)
    if (!kSkip.count(it.key())) flatten_into(it.value(), it.key(), out);
  // Per rank, keep what describes the setup (host, device, batch shapes); the rest are outcomes compared elsewhere.
  auto ranks = manifest.find("ranks");
  if (ranks != manifest.end() && ranks->is_array())
    for (size_t i = 0; i < ranks->size(); ++i) {
      const auto& r = (*ranks)[i];
      if (!r.is_object()) continue;
      std::string p = "ranks." + std::to_string(i) + ".";
      for (const char* k : {"host", "device", "batch"})
        if (r.contains(k)) flatten_into(r[k], p + k, out);
    }
  return out;
}

bool load_diff_run(const std::string& dir, DiffRun& run, std::string& error) {
  run = DiffRun{};
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    error = dir + " is not a directory";
    return false;
  }
  fs::path root(dir);
  fs::path manifest = root / kManifestFile;
  if (fs::exists(manifest, ec)) {
    std::ifstream in(manifest);
    if (!in) {
      run.problems.push_back("cannot read manifest.json");
    } else {
      run.manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (run.manifest.is_discarded() || !run.manifest.is_object()) {
        run.problems.push_back("manifest.json is not a JSON object");
        run.manifest = nullptr;
      }
    }
  } else {
    run.problems.push_back("manifest.json is missing");
  }
  if (has_rank_trace(root)) {
    RunTrace trace;
    std::string err;
    if (load_run(dir, trace, err)) {
      run.has_traces = true;
      run.traces = summarize(trace);
      for (const auto& p : trace.problems)
        if (p != "manifest.json is missing" && p != "manifest.json is not valid JSON") run.problems.push_back(p);
    } else {
      run.problems.push_back(err);
    }
  }
  for (const auto& [rank, path] : verify_files(root, "summaries")) {
    std::vector<TensorRecord> recs;
    read_jsonl(path, run.problems, [&](const nlohmann::json& j) {
      if (!j.contains("step") || !j["step"].is_number_integer() || !j.contains("kind") || !j["kind"].is_string() ||
          !j.contains("name") || !j["name"].is_string() || !j.contains("stats") || !j["stats"].is_object())
        return false;
      TensorRecord r;
      r.step = j["step"].get<int64_t>();
      r.kind = j["kind"].get<std::string>();
      r.name = j["name"].get<std::string>();
      if (j.contains("micro") && j["micro"].is_number_integer()) r.micro = j["micro"].get<int>();
      r.stats = j["stats"];
      recs.push_back(std::move(r));
      return true;
    });
    if (!recs.empty()) run.summaries[rank] = std::move(recs);
  }
  for (const auto& [rank, path] : verify_files(root, "replicas")) {
    std::vector<ReplicaRecord> recs;
    read_jsonl(path, run.problems, [&](const nlohmann::json& j) {
      if (!j.contains("step") || !j["step"].is_number_integer() || !j.contains("param_hash") ||
          !j["param_hash"].is_string())
        return false;
      recs.push_back({j["step"].get<int64_t>(), j["param_hash"].get<std::string>()});
      return true;
    });
    if (!recs.empty()) run.replicas[rank] = std::move(recs);
  }
  if (run.manifest.is_null() && !run.has_traces && run.summaries.empty() && run.replicas.empty()) {
    error = "nothing to compare in " + dir + " (no readable manifest.json, rank traces or verify/ summaries)";
    return false;
  }
  return true;
}

RunDiff diff_runs(const DiffRun& a, const DiffRun& b, const DiffOptions& opt) {
  RunDiff d;
  d.dir_a = a.dir;
  d.dir_b = b.dir;
  d.problems_a = a.problems;
  d.problems_b = b.problems;
  auto fa = flatten_manifest(a.manifest);
  auto fb = flatten_manifest(b.manifest);
  std::set<std::string> keys;
  for (const auto& [k, v] : fa) keys.insert(k);
  for (const auto& [k, v] : fb) keys.insert(k);
  std::set<std::string> changed;
  for (const auto& k : keys) {
    auto ia = fa.find(k);
    auto ib = fb.find(k);
    nlohmann::json va = ia == fa.end() ? nlohmann::json(nullptr) : ia->second;
    nlohmann::json vb = ib == fb.end() ? nlohmann::json(nullptr) : ib->second;
    if (va == vb) continue;
    ConfigDifference c{k, va, vb, variable_of(k)};
    if (!c.variable.empty()) changed.insert(c.variable);
    d.config.push_back(std::move(c));
  }
  for (const auto& v : distributed_variables())
    if (changed.count(v.name)) d.distributed_changed.push_back(v.name);
  if (d.distributed_changed.size() > 1) {
    std::string names;
    for (size_t i = 0; i < d.distributed_changed.size(); ++i) names += (i ? ", " : "") + d.distributed_changed[i];
    d.warning = std::to_string(d.distributed_changed.size()) + " distributed variables changed (" + names +
                "): diff one variable at a time, or a difference cannot be put down to one cause";
  }
  d.timing = diff_timing(a, b);
  d.tensors = diff_tensors(a, b, opt.rtol);
  d.replicas = diff_replicas(a, b);
  return d;
}

nlohmann::json run_diff_json(const RunDiff& d) {
  auto div_json = [](const std::optional<TensorDivergence>& t) -> nlohmann::json {
    if (!t) return nullptr;
    auto rel = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    return {{"rank", t->rank},
            {"step", t->step},
            {"kind", t->kind},
            {"micro", t->micro >= 0 ? nlohmann::json(t->micro) : nlohmann::json(nullptr)},
            {"name", t->name},
            {"reason", t->reason},
            {"a", t->a},
            {"b", t->b},
            {"rel", {{"mean", rel(t->rel_mean)}, {"std", rel(t->rel_std)}, {"l2", rel(t->rel_l2)}}},
            {"hint", t->hint.empty() ? nlohmann::json(nullptr) : nlohmann::json(t->hint)}};
  };
  auto block_json = [](const TimingBlock& b) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& s : b.stages) {
      nlohmann::json row = delta_json(s.per_step_ms);
      row["stage"] = s.stage;
      stages.push_back(row);
    }
    return nlohmann::json{{"step_median_ms", delta_json(b.step_median_ms)}, {"steps", delta_json(b.steps)},
                          {"stages_ms_per_step", stages}};
  };
  nlohmann::json config = nlohmann::json::array();
  for (const auto& c : d.config)
    config.push_back({{"key", c.key}, {"a", c.a}, {"b", c.b},
                      {"variable", c.variable.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.variable)}});
  nlohmann::json ranks_timing = nlohmann::json::array();
  for (const auto& [r, b] : d.timing.ranks) {
    nlohmann::json j = block_json(b);
    j["rank"] = r;
    ranks_timing.push_back(j);
  }
  nlohmann::json tranks = nlohmann::json::array();
  for (const auto& r : d.tensors.ranks)
    tranks.push_back({{"rank", r.rank},
                      {"compared", r.compared},
                      {"identical", r.identical},
                      {"within_tolerance", r.within_tolerance},
                      {"diverged", r.diverged},
                      {"only_a", r.only_a},
                      {"only_b", r.only_b},
                      {"first_divergence", div_json(r.first_divergence)},
                      {"first_hash_difference", div_json(r.first_hash_difference)}});
  nlohmann::json rranks = nlohmann::json::array();
  for (const auto& r : d.replicas.ranks)
    rranks.push_back({{"rank", r.rank},
                      {"compared", r.compared},
                      {"first_step", r.first_step ? nlohmann::json(*r.first_step) : nlohmann::json(nullptr)},
                      {"hash_a", r.first_step ? nlohmann::json(r.hash_a) : nlohmann::json(nullptr)},
                      {"hash_b", r.first_step ? nlohmann::json(r.hash_b) : nlohmann::json(nullptr)}});
  return {
      {"a", {{"dir", d.dir_a}, {"problems", d.problems_a}}},
      {"b", {{"dir", d.dir_b}, {"problems", d.problems_b}}},
      {"config",
       {{"differences", config},
        {"distributed_changed", d.distributed_changed},
        {"warning", d.warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.warning)}}},
      {"timing",
       {{"source", d.timing.source},
        {"note", d.timing.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.timing.note)},
        {"mean", block_json(d.timing.mean)},
        {"ranks", ranks_timing}}},
      {"tensors",
       {{"compared", d.tensors.compared},
        {"note", d.tensors.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.tensors.note)},
        {"rtol", d.tensors.rtol},
        {"first_divergence", div_json(d.tensors.first)},
        {"ranks", tranks}}},
      {"replicas",
       {{"compared", d.replicas.compared},
        {"note", d.replicas.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.replicas.note)},
        {"first_step", d.replicas.first_step ? nlohmann::json(*d.replicas.first_step) : nlohmann::json(nullptr)},
        {"ranks", rranks}}},
  };
}

std::string run_diff_text(const RunDiff& d) {
  std::string out;
  out += "A: " + d.dir_a + "\nB: " + d.dir_b + "\n";
  for (const auto& p : d.problems_a) out += "  A: " + p + "\n";
  for (const auto& p : d.problems_b) out += "  B: " + p + "\n";

  out += "\nmanifest/config: ";
  if (d.config.empty()) {
    out += "no differences\n";
  } else {
    out += std::to_string(d.config.size()) + " difference(s)\n";
    size_t w = 0;
    for (const auto& c : d.config) w = std::max(w, c.key.size());
    for (const auto& c : d.config) {
      std::string line = "  " + c.key + std::string(w - c.key.size(), ' ') + "  " + short_json(c.a) + " -> " +
                         short_json(c.b);
      if (!c.variable.empty()) line += "   [" + c.variable + "]";
      out += line + "\n";
    }
  }
  if (!d.warning.empty())
    out += "WARNING: " + d.warning + "\n";
  else if (d.distributed_changed.size() == 1)
    out += "one distributed variable changed: " + d.distributed_changed[0] + "\n";
  else
    out += "no distributed variable changed\n";

  const char* source = d.timing.source == "traces"     ? "from the rank traces"
                       : d.timing.source == "manifest" ? "from the manifests"
                                                       : "not available";
  out += "\nstep time (" + std::string(source) + ")\n";
  if (!d.timing.note.empty()) out += "  " + d.timing.note + "\n";
  if (d.timing.source != "none") {
    char line[256];
    std::snprintf(line, sizeof(line), "  %-20s %10s %10s %10s %8s\n", "mean over ranks", "A", "B", "B-A", "B-A %");
    out += line;
    auto row = [&](const std::string& label, const Delta& v) {
      std::snprintf(line, sizeof(line), "  %-20s %s %s %s\n", label.c_str(), opt_ms(v.a).c_str(), opt_ms(v.b).c_str(),
                    delta_cells(v).c_str());
      out += line;
    };
    row("steps", d.timing.mean.steps);
    row("step median ms", d.timing.mean.step_median_ms);
    if (!d.timing.mean.stages.empty()) out += "  ms per step, by stage:\n";
    for (const auto& s : d.timing.mean.stages) row("  " + s.stage, s.per_step_ms);
    if (d.timing.ranks.size() > 0) {
      out += "  per rank, step median ms:\n";
      for (const auto& [r, b] : d.timing.ranks) row("  rank " + std::to_string(r), b.step_median_ms);
    }
  }

  out += "\ntensor summaries";
  if (!d.tensors.compared) {
    out += ": not compared (" + d.tensors.note + ")\n";
  } else {
    out += " (rtol " + fmt("%g", d.tensors.rtol) + " on mean/std/l2; equal hashes are identical)\n";
    for (const auto& r : d.tensors.ranks) {
      out += "  rank " + std::to_string(r.rank) + ": " + std::to_string(r.compared) + " compared, " +
             std::to_string(r.identical) + " identical, " + std::to_string(r.within_tolerance) + " within tolerance, " +
             std::to_string(r.diverged) + " diverged";
      if (r.only_a || r.only_b)
        out += "; " + std::to_string(r.only_a) + " only in A, " + std::to_string(r.only_b) + " only in B";
      out += "\n";
      if (r.first_divergence) {
        const auto& t = *r.first_divergence;
        out += "    first divergence: " + tensor_where(t) + " (" + t.reason + ")\n";
        out += "      A: " + stats_line(t.a) + "\n      B: " + stats_line(t.b) + "\n";
        if (t.reason != "count")
          out += "      relative difference: mean " + fmt("%.3g", t.rel_mean) + ", std " + fmt("%.3g", t.rel_std) +
                 ", l2 " + fmt("%.3g", t.rel_l2) + "\n";
        if (!t.hint.empty()) out += "      likely: " + t.hint + "\n";
      } else if (r.first_hash_difference) {
        out += "    no divergence beyond tolerance; first bitwise difference: " +
               tensor_where(*r.first_hash_difference) + "\n";
      } else if (r.compared) {
        out += "    every matched record bitwise identical\n";
      }
    }
    if (d.tensors.first)
      out += "  => the runs first diverge at " + tensor_where(*d.tensors.first) + " (rank " +
             std::to_string(d.tensors.first->rank) + ")\n";
    else
      out += "  => no divergence beyond tolerance\n";
  }

  out += "\nparameter hashes";
  if (!d.replicas.compared) {
    out += ": not compared (" + d.replicas.note + ")\n";
  } else {
    out += " (after each optimizer step; step -1 = after the initial broadcast)\n";
    for (const auto& r : d.replicas.ranks) {
      out += "  rank " + std::to_string(r.rank) + ": " + std::to_string(r.compared) + " steps compared, ";
      out += r.first_step ? "first differ after step " + std::to_string(*r.first_step) + " (A " + r.hash_a + ", B " +
                                r.hash_b + ")\n"
                          : std::string("identical\n");
    }
  }
  return out;
}

}  // namespace ddp
