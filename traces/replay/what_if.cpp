// --what-if: the run replayed with the edits, the report, the predicted run folder.
#include "traces/replay/what_if.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "traces/base/text_format.h"
#include "traces/model/run_folder.h"
#include "traces/native/trace_writer.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/contention.h"
#include "traces/replay/replay_holdout.h"
#include "traces/replay/replay_trust.h"

namespace ddp {
namespace {

using Kind = ReplayEdit::Kind;

std::string gbps(double bytes_per_s) { return fmt("%.3g GB/s", bytes_per_s / 1e9); }

std::string assumption(const WhatIfEdit& w, const ReplayResult& r) {
  const ReplayEdit& e = w.edit;
  switch (e.kind) {
    case Kind::stage_as_median:
      return fmt("rank %d's %s takes, step by step, what the median rank's took; the rest as measured", e.rank,
                 e.other ? "untracked time" : std::string(stage_name(e.stage)).c_str());
    case Kind::workers:
      return e.value == 0 ? "each rank fetches its batches itself, each fetch as measured"
             : r.stretch_measured.empty()
                 ? fmt("%.0f workers a rank, batch n on worker n mod %.0f, each fetch as measured: more workers do "
                       "not slow each other or the ranks down (the run recorded no CPU splits: CPU contention left "
                       "out)",
                       e.value, e.value)
                 : fmt("%.0f workers a rank, batch n on worker n mod %.0f, each fetch's CPU as measured and its wait "
                       "for a core as the host's cores then give (processor sharing)",
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
    case Kind::cores:
      return fmt(
          "each host's ranks on %g cores: the threads the run showed runnable (its spans' waits for a core) "
          "share them, each span's wait for one as processor sharing then makes it; its CPU and blocked time as "
          "measured",
          e.value);
  }
  return {};
}

}  // namespace

bool what_if(const RunTrace& run, const std::vector<WhatIfEdit>& edits, WhatIf& out, std::string& err,
             bool keep_trace) {
  using namespace rank_data;
  std::vector<RankData> data;
  for (const RankTrace& t : run.ranks) data.push_back(prepare(t));
  std::vector<ReplayEdit> es;
  for (const WhatIfEdit& w : edits) {
    const std::optional<ReplayEdit> e = edit_for_traces(w.edit, data);
    if (!e) {
      err = "--what-if: " + w.text + ": the run has no rank " + std::to_string(w.edit.rank);
      return false;
    }
    es.push_back(*e);
  }
  const std::vector<uint32_t> common = common_steps(data);
  out.edits = edits;
  out.ranks = static_cast<int>(data.size());
  out.steps = common.size();
  out.result = replay(data, common, es, keep_trace, host_cores(run, data));
  out.result.holdout = replay_holdout(data, common);
  out.trusted = trusted(out.result);
  for (const WhatIfEdit& w : edits) out.assumptions.push_back(assumption(w, out.result));
  if (!out.result.saturated.empty()) out.assumptions.push_back(out.result.saturated);
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
  auto when_held_out = [&](double v) { return r.ok && r.holdout.ok ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"edits", edits},
          {"ranks", w.ranks},
          {"steps", w.steps},
          {"ok", r.ok},
          {"reason", distrust_reason(r)},
          {"step_ms", when_ok(r.step_ms)},
          {"measured_step_ms", when_ok(r.measured_ms)},
          {"replayed_step_ms", when_ok(r.fit_ms)},
          {"replay",
           {{"step_error_mean", when_ok(r.error_mean)},
            {"step_error_p90", when_ok(r.error_p90)},
            {"holdout_error_mean", when_held_out(r.holdout.error_mean)},
            {"holdout_error_p90", when_held_out(r.holdout.error_p90)},
            {"holdout_mean_step_error", when_held_out(r.holdout.mean_step_error)},
            {"holdout_steps", r.ok ? r.holdout.steps : 0},
            {"trusted", w.trusted}}},
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
  if (r.holdout.ok)
    out += fmt(
        "  the replay predicts steps it did not fit within %.1f%% (mean), %.1f%% (p90), their mean step within %.1f%% "
        "(%zu steps held out)\n",
        100 * r.holdout.error_mean, 100 * r.holdout.error_p90, 100 * r.holdout.mean_step_error, r.holdout.steps);
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
  // The measured run's manifest, with the predicted world and what was predicted (a run without one: those alone).
  Manifest m = run.manifest.value_or(Manifest{});
  m.fields.world_size = world;
  m.fields.what_if = what_if_json(w);
  (*m.fields.what_if)["of_run"] = run.dir;
  return write_manifest(dir, m, err);
}

}  // namespace ddp
