// --what-if: the edits read from the command line, the run replayed with them, the report.
#include "traces/replay/what_if.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "traces/base/text_format.h"
#include "traces/model/run_folder.h"
#include "traces/native/trace_writer.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/replay_trust.h"

namespace ddp {
namespace {

using Kind = ReplayEdit::Kind;

constexpr const char* kEditForms =
    "rank<R>.<stage>=median, workers=N, prefetch=N, bandwidth=X[GB/s|Gb/s|MB/s], bucket_cap_mb=X, accum=K, "
    "ranks=N, nodes=M";

bool number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v);
}

bool count(const std::string& s, double lo, double hi, double& v) {
  return number(s, v) && v == std::floor(v) && v >= lo && v <= hi;
}

// A link's bandwidth in bytes/s: GB/s (a bare number too), Gb/s or Gbit/s, MB/s.
bool bandwidth(std::string s, double& bytes_per_s) {
  const std::pair<const char*, double> units[] = {{"GB/s", 1e9}, {"Gbit/s", 1e9 / 8}, {"Gb/s", 1e9 / 8}, {"MB/s", 1e6}};
  double scale = 1e9;
  for (const auto& [unit, factor] : units) {
    const std::string u(unit);
    if (s.size() > u.size() && s.compare(s.size() - u.size(), u.size(), u) == 0) {
      s.resize(s.size() - u.size());
      scale = factor;
      break;
    }
  }
  double v = 0;
  if (!number(s, v) || v <= 0) return false;
  bytes_per_s = v * scale;
  return true;
}

bool parse_one(const std::string& part, WhatIfEdit& out, std::string& err) {
  out.text = part;
  const size_t eq = part.find('=');
  if (eq == std::string::npos) {
    err = "--what-if: \"" + part + "\" is not an edit (" + kEditForms + ")";
    return false;
  }
  const std::string key = part.substr(0, eq), val = part.substr(eq + 1);
  ReplayEdit& e = out.edit;
  double v = 0;
  if (key.rfind("rank", 0) == 0 && key.find('.') != std::string::npos) {
    const size_t dot = key.find('.');
    const std::string stage = key.substr(dot + 1);
    if (!count(key.substr(4, dot - 4), 0, 1 << 20, v)) {
      err = "--what-if: \"" + key + "\" names no rank (rank<R>.<stage>, e.g. rank1.forward)";
      return false;
    }
    e.kind = Kind::stage_as_median;
    e.rank = static_cast<int>(v);
    if (val != "median") {
      err = "--what-if: " + key + " can be set to the median rank's (" + key + "=median), not to \"" + val + "\"";
      return false;
    }
    if (stage == "other") {
      e.other = true;
      return true;
    }
    const std::optional<Stage> s = stage_from_name(stage);
    if (!s) {
      err = "--what-if: no stage \"" + stage + "\" (stages: " + stage_names_with(kStageMainThread) + ", " +
            stage_names_with(kStageLoaderThread) + ", other)";
      return false;
    }
    if (is_wait(*s) || stage_has(*s, kStageCommunication)) {
      err = "--what-if: " + stage +
            " is time spent waiting for another stage or rank: edit that one (or the link: "
            "bandwidth=X)";
      return false;
    }
    e.stage = *s;
    return true;
  }
  if (key == "workers" && count(val, 0, 1024, v)) {
    e.kind = Kind::workers, e.value = v;
  } else if (key == "prefetch" && count(val, 1, 1024, v)) {
    e.kind = Kind::prefetch, e.value = v;
  } else if (key == "bandwidth" && bandwidth(val, v)) {
    e.kind = Kind::bandwidth, e.value = v;
  } else if (key == "bucket_cap_mb" && number(val, v) && v > 0 && v <= 1e6) {
    e.kind = Kind::bucket_cap, e.value = v * 1024 * 1024;  // DDP: int(bucket_cap_mb * 1024 * 1024)
  } else if (key == "accum" && count(val, 1, 255, v)) {
    e.kind = Kind::accumulate, e.value = v;
  } else if (key == "ranks" && count(val, 2, 1 << 20, v)) {
    e.kind = Kind::ranks, e.value = v;
  } else if (key == "nodes" && count(val, 1, 1 << 16, v)) {
    e.kind = Kind::nodes, e.value = v;
  } else if (key == "workers" || key == "prefetch" || key == "bandwidth" || key == "bucket_cap_mb" || key == "accum" ||
             key == "ranks" || key == "nodes") {
    const std::map<std::string, const char*> takes = {
        {"workers", "a count from 0 to 1024"},
        {"prefetch", "a count from 1 to 1024"},
        {"bandwidth", "a positive number with GB/s, Gb/s or MB/s (bare: GB/s), the link's bus bandwidth"},
        {"bucket_cap_mb", "a positive number of MB"},
        {"accum", "a count of micro-steps from 1 to 255"},
        {"ranks", "a count of ranks from 2"},
        {"nodes", "a count of machines from 1"}};
    err = "--what-if: " + part + ": " + key + " takes " + takes.at(key);
    return false;
  } else {
    err = "--what-if: no edit \"" + key + "\" (" + kEditForms + ")";
    return false;
  }
  return true;
}

std::string gbps(double bytes_per_s) { return fmt("%.3g GB/s", bytes_per_s / 1e9); }

std::string assumption(const WhatIfEdit& w, const ReplayResult& r) {
  const ReplayEdit& e = w.edit;
  switch (e.kind) {
    case Kind::stage_as_median:
      return fmt("rank %d's %s takes, step by step, what the median rank's took; the rest as measured", e.rank,
                 e.other ? "untracked time" : std::string(stage_name(e.stage)).c_str());
    case Kind::workers:
      return e.value == 0 ? "each rank fetches its batches itself, each fetch as measured"
                          : fmt("%.0f workers a rank, batch n on worker n mod %.0f, each fetch as measured: more "
                                "workers do not slow each other or the ranks down (CPU contention left out)",
                                e.value, e.value);
    case Kind::prefetch:
      return fmt("%.0f batches in flight a worker: the queue holds workers x %.0f", e.value, e.value);
    case Kind::bandwidth:
      return fmt(
          "each bucket's bytes moved as a ring moves them (2(n-1)/n of them over each link) at %s of bus "
          "bandwidth instead of the run's fitted %s; its fixed cost (%.3f ms) and the rest of its measured "
          "time kept",
          gbps(e.value).c_str(), gbps(r.comm_bus_bytes_per_s).c_str(), r.comm_fixed_ms);
    case Kind::bucket_cap:
      return fmt(
          "buckets re-cut at %.3g MB (the first at 1 MB, as DDP does) at byte counts, not parameter "
          "boundaries; the gradients get ready as the measured buckets did; each bucket costs the fitted "
          "fixed cost plus its ring bytes at the bus bandwidth",
          e.value / (1024 * 1024));
    case Kind::accumulate:
      return fmt(
          "%.0f micro-steps an optimizer step: each step's data, forward and backward repeated as measured "
          "under no_sync (no bucket launched), one batch each; the allreduce and the optimizer once (the "
          "step then holds %.0fx the samples)",
          e.value, e.value);
    case Kind::ranks:
      return fmt(
          "%.0f ranks in a ring: each bucket's fixed cost x (n-1) hops over the run's, its bytes x 2(n-1)/n; "
          "every rank as the measured ones (no new stragglers: the slowest measured rank sets the pace)",
          e.value);
    case Kind::nodes:
      return fmt(
          "the ranks on %.0f machines: the ring crosses the link between them, its bus bandwidth the lower "
          "of the run's (%s) and the link's",
          e.value, gbps(r.comm_bus_bytes_per_s).c_str());
  }
  return {};
}

}  // namespace

bool parse_what_if(const std::string& text, std::vector<WhatIfEdit>& out, std::string& err) {
  out.clear();
  std::set<std::string> seen;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    WhatIfEdit e;
    if (!parse_one(text.substr(at, comma - at), e, err)) return false;
    const std::string kind = e.edit.kind == Kind::stage_as_median ? e.text : e.text.substr(0, e.text.find('='));
    if (!seen.insert(kind).second) {
      err = "--what-if: " + kind + " is given twice";
      return false;
    }
    out.push_back(e);
    at = comma + 1;
  }
  return true;
}

bool what_if(const RunTrace& run, const std::vector<WhatIfEdit>& edits, WhatIf& out, std::string& err,
             bool keep_trace) {
  using namespace rank_data;
  std::vector<RankData> data;
  for (const RankTrace& t : run.ranks) data.push_back(prepare(t));
  std::vector<ReplayEdit> es;
  for (const WhatIfEdit& w : edits) {
    ReplayEdit e = w.edit;
    if (e.kind == Kind::stage_as_median) {  // the rank's place among the traces the run holds
      e.rank = rank_index(data, w.edit.rank);
      if (e.rank < 0) {
        err = "--what-if: " + w.text + ": the run has no rank " + std::to_string(w.edit.rank);
        return false;
      }
    }
    es.push_back(e);
  }
  const std::vector<uint32_t> common = common_steps(data);
  out.edits = edits;
  out.ranks = static_cast<int>(data.size());
  out.steps = common.size();
  out.result = replay(data, common, es, keep_trace);
  out.trusted = trusted(out.result);
  for (const WhatIfEdit& w : edits) out.assumptions.push_back(assumption(w, out.result));
  return true;
}

nlohmann::json what_if_json(const WhatIf& w) {
  const auto& r = w.result;
  nlohmann::json edits = nlohmann::json::array(), stages = nlohmann::json::object();
  for (const WhatIfEdit& e : w.edits) edits.push_back(e.text);
  std::set<std::string> names;
  for (const auto& [name, v] : r.stage_ms) names.insert(name);
  for (const auto& [name, v] : r.fit_stage_ms) names.insert(name);
  for (const std::string& n : names)
    stages[n] = {{"replayed_ms", r.fit_stage_ms.count(n) ? r.fit_stage_ms.at(n) : 0.0},
                 {"predicted_ms", r.stage_ms.count(n) ? r.stage_ms.at(n) : 0.0}};
  auto when_ok = [&](double v) { return r.ok ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {
      {"edits", edits},
      {"ranks", w.ranks},
      {"steps", w.steps},
      {"ok", r.ok},
      {"reason", r.ok ? notes_line(r) : r.error},
      {"step_ms", when_ok(r.step_ms)},
      {"measured_step_ms", when_ok(r.measured_ms)},
      {"replayed_step_ms", when_ok(r.fit_ms)},
      {"replay",
       {{"step_error_mean", when_ok(r.error_mean)}, {"step_error_p90", when_ok(r.error_p90)}, {"trusted", w.trusted}}},
      {"stages", stages},
      {"comm_model", {{"fixed_ms", r.comm_fixed_ms}, {"bus_bytes_per_s", r.comm_bus_bytes_per_s}}},
      {"assumptions", w.assumptions}};
}

std::string what_if_text(const WhatIf& w) {
  const auto& r = w.result;
  std::string edits;
  for (const WhatIfEdit& e : w.edits) edits += (edits.empty() ? "" : ", ") + e.text;
  std::string out = fmt("what if %s (%d ranks, %zu steps replayed):\n", edits.c_str(), w.ranks, w.steps);
  if (!r.ok) return out + "  cannot be replayed: " + r.error + "\n";
  out += fmt("  measured step %.3f ms; replayed as measured %.3f ms (error %.1f%% mean, %.1f%% p90)\n", r.measured_ms,
             r.fit_ms, 100 * r.error_mean, 100 * r.error_p90);
  out += fmt("  predicted step %.3f ms (%+.1f%%)%s\n", r.step_ms, 100 * (r.step_ms / r.fit_ms - 1),
             w.trusted ? "" : ("  UNTRUSTED: " + distrust_reason(r)).c_str());
  for (const WhatIfEdit& e : w.edits)
    if (e.edit.kind == Kind::accumulate && e.edit.value > 1)
      out += fmt("  a micro-batch: %.3f ms (a step of one now: %.3f ms)\n", r.step_ms / e.edit.value, r.fit_ms);
  out += fmt("  %-22s %10s %10s\n", "ms a step, per rank", "replayed", "predicted");
  std::set<std::string> names;
  for (const auto& [name, v] : r.stage_ms) names.insert(name);
  for (const auto& [name, v] : r.fit_stage_ms) names.insert(name);
  for (const std::string& n : names) {
    const double a = r.fit_stage_ms.count(n) ? r.fit_stage_ms.at(n) : 0, b = r.stage_ms.count(n) ? r.stage_ms.at(n) : 0;
    if (a < 0.0005 && b < 0.0005) continue;
    out += fmt("  %-22s %10.3f %10.3f\n", n.c_str(), a, b);
  }
  out += "  assumes:\n";
  for (const std::string& a : w.assumptions) out += "  - " + a + "\n";
  return out;
}

bool write_predicted_run(const RunTrace& run, const WhatIf& w, const std::string& dir, std::string& err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) {
    err = dir + " exists and is not an empty folder: the predicted run goes to a new one";
    return false;
  }
  if (!w.result.ok || w.result.predicted.empty()) {
    err = "nothing predicted to write" + (w.result.error.empty() ? std::string() : ": " + w.result.error);
    return false;
  }
  fs::create_directories(dir, ec);
  if (ec) {
    err = "cannot create " + dir + ": " + ec.message();
    return false;
  }
  const uint32_t world = w.result.predicted.front().world;
  if (!write_native_traces(dir, w.result.predicted, world, err)) return false;
  nlohmann::json manifest = run.manifest.is_object() ? run.manifest : nlohmann::json::object();
  manifest["world_size"] = world;
  manifest["what_if"] = what_if_json(w);
  manifest["what_if"]["of_run"] = run.dir;
  std::ofstream out(in_run(dir, kManifestFile));
  out << manifest.dump(2) << "\n";
  if (!out) {
    err = "cannot write " + in_run(dir, kManifestFile);
    return false;
  }
  return true;
}

}  // namespace ddp
