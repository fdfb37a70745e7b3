// The analysis as JSON (`ddp_profile --analyze DIR --json`, schema ddp_profile.analysis/1, docs/stalls.md) and as
// the text report.
#include <string>

#include "traces/analysis/analysis.h"
#include "traces/analysis/analysis_report_scale.h"
#include "traces/base/rank_set.h"
#include "traces/base/text_format.h"

namespace ddp {
namespace {

nlohmann::json cause_json(const StallCause& c) {
  nlohmann::json victims = nlohmann::json::array();
  for (const StallVictim& v : c.victims) victims.push_back({{"rank", v.rank}, {"stage", v.stage}, {"ms", v.ms}});
  return {{"rank", c.rank},
          {"stage", c.stage},
          {"lost_ms", c.lost_ms},
          {"lost_ms_per_step", c.lost_ms_per_step},
          {"share", c.share},
          {"victims", victims},
          {"evidence", c.evidence},
          {"explanation", c.explanation},
          {"at_ns", c.at_ns},
          {"at_rank", c.at_rank},
          {"at_step", c.at_step},
          {"what_if_step_ms", c.what_if_step_ms >= 0 ? nlohmann::json(c.what_if_step_ms) : nlohmann::json(nullptr)}};
}

nlohmann::json rank_json(const RankAnalysis& r) {
  const AllreduceStats& ar = r.allreduce;
  // A size the trace does not carry is unknown, not zero.
  auto known = [&](double v) { return ar.sizes_known ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const LoaderStats& L = r.loader;
  return {{"rank", r.rank},
          {"steps", r.steps},
          {"step_ms", r.step_ms},
          {"stages_ms_per_step", r.stages_ms_per_step},
          {"wait_data_ms", r.wait_data_ms},
          {"wait_comm_ms", r.wait_comm_ms},
          {"micro_steps", r.micro_steps},
          {"overlap_pct", r.overlap_pct},
          {"allreduce",
           {{"count_per_step", ar.count_per_step},
            {"syncs_per_step", ar.syncs_per_step},
            {"bytes_per_step", known(ar.bytes_per_step)},
            {"mean_bucket_bytes", known(ar.mean_bucket_bytes)},
            {"time_ms_per_step", ar.time_ms_per_step},
            {"algbw_gbps", known(ar.algbw_gbps)},
            {"busbw_gbps", known(ar.busbw_gbps)},
            {"sizes_known", ar.sizes_known}}},
          {"skew_ms", r.skew_ms},
          {"cpu_wait_ms", r.cpu_wait_ms},
          {"h2d_gbps", r.h2d_gbps},
          {"loader",
           {{"workers", L.workers},
            {"batches", L.batches},
            {"ms_per_batch", L.ms_per_batch},
            {"batch_ms", L.batch_ms},
            {"supply_ms_per_batch", L.supply_ms_per_batch},
            {"demand_ms_per_batch", L.demand_ms_per_batch},
            {"utilization", L.utilization},
            {"cpu_wait_ms_per_batch", L.cpu_wait_ms_per_batch},
            {"workers_needed", L.workers_needed},
            {"burst",
             {{"found", L.burst.found},
              {"batches", L.burst.batches},
              {"slow_batches", L.burst.slow_batches},
              {"queue_depth", L.burst.depth},
              {"queue_lead_ms", L.burst.queue_lead_ms},
              {"typical_fetch_ms", L.burst.typical_fetch_ms},
              {"slow_fetch_ms", L.burst.slow_fetch_ms},
              {"wait_share", L.burst.wait_share}}},
            {"worker_starts", L.worker_starts},
            {"passes_starting_workers", L.passes_starting_workers},
            {"worker_start_ms", L.worker_start_ms},
            {"queue_empty_fraction",
             L.queue_empty_fraction >= 0 ? nlohmann::json(L.queue_empty_fraction) : nlohmann::json(nullptr)}}},
          {"complete", r.complete},
          {"dropped_events", r.dropped}};
}

nlohmann::json replay_json(const ReplayFit& r) {
  auto when_ok = [&](double v) { return r.ok ? nlohmann::json(v) : nlohmann::json(nullptr); };
  auto when_held_out = [&](double v) { return r.ok && r.holdout_ok ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"step_error_mean", when_ok(r.step_error_mean)},
          {"step_error_p90", when_ok(r.step_error_p90)},
          {"replayed_step_ms", when_ok(r.replayed_step_ms)},
          {"holdout_error_mean", when_held_out(r.holdout_error_mean)},
          {"holdout_error_p90", when_held_out(r.holdout_error_p90)},
          {"holdout_mean_step_error", when_held_out(r.holdout_mean_step_error)},
          {"holdout_steps", r.ok ? r.holdout_steps : 0},
          {"trusted", r.trusted},
          {"reason", r.ok ? r.untrusted_reason : r.error}};
}

nlohmann::json host_cpu_json(const HostCpu& h) {
  return {{"host", h.host},
          {"ranks", h.ranks},
          {"cores", h.cores},
          {"cpu_ms_per_step", h.cpu_ms_per_step},
          {"wait_for_cpu_ms_per_step", h.wait_ms_per_step},
          {"stretch", h.stretch},
          {"runnable_threads", h.runnable},
          {"saturated", h.saturated},
          {"culprit", h.culprit_rank < 0 ? nlohmann::json(nullptr)
                                         : nlohmann::json{{"rank", h.culprit_rank},
                                                          {"stage", h.culprit_stage},
                                                          {"cpu_excess_ms_per_step", h.culprit_excess_ms_per_step}}}};
}

std::string host_cpu_text(const HostCpu& h) {
  std::string out = fmt("  host %s (ranks", h.host.c_str());
  for (int r : h.ranks) out += fmt(" %d", r);
  out += fmt("): %g cores; spans on a CPU %.2f ms/step, waiting for a core %.2f ms/step (%.2f ms a ms of CPU)", h.cores,
             h.cpu_ms_per_step, h.wait_ms_per_step, h.stretch);
  if (h.saturated) out += fmt(": saturated, ~%.1f runnable threads", h.runnable);
  if (h.culprit_rank >= 0)
    out += fmt("; rank %d's %s uses %.2f ms/step more CPU than the other ranks'", h.culprit_rank,
               h.culprit_stage.c_str(), h.culprit_excess_ms_per_step);
  return out + "\n";
}

// The replay's lines: the error its predictions carry (the steps it did not fit), its graph's fit to the run beside
// it, and why it is not trusted when it is not.
std::string replay_text(const ReplayFit& r) {
  if (!r.ok) return {};
  std::string out = "\nreplay: ";
  if (r.holdout_ok)
    out +=
        fmt("predicts steps it did not fit within %.1f%% (mean), %.1f%% (p90), their mean step within %.1f%% (%zu "
            "steps held out); ",
            100 * r.holdout_error_mean, 100 * r.holdout_error_p90, 100 * r.holdout_mean_step_error, r.holdout_steps);
  out += fmt("its graph gives the run back within %.1f%% (mean), %.1f%% (p90)\n", 100 * r.step_error_mean,
             100 * r.step_error_p90);
  if (!r.trusted) out += "  untrusted: " + r.untrusted_reason + "\n";
  return out;
}

}  // namespace

nlohmann::json analysis_json(const Analysis& a) {
  nlohmann::json causes = nlohmann::json::array();
  for (const StallCause& c : a.causes) causes.push_back(cause_json(c));
  nlohmann::json flags = nlohmann::json::array();
  for (const StallFlag& f : a.flags)
    flags.push_back({{"id", f.id},
                     {"rank", f.rank},
                     {"message", f.message},
                     {"evidence", f.evidence.is_null() ? nlohmann::json::object() : f.evidence}});
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankAnalysis& r : a.ranks) ranks.push_back(rank_json(r));
  nlohmann::json gpu = nlohmann::json::array();
  for (const GpuTime& g : a.gpu) gpu.push_back(gpu_time_json(g));
  nlohmann::json cpu = nlohmann::json::array();
  for (const HostCpu& h : a.cpu) cpu.push_back(host_cpu_json(h));
  return {{"schema", "ddp_profile.analysis/1"},
          {"world_size", a.world},
          {"steps", a.steps},
          {"warmup_steps", a.warmup_steps},
          {"step_ms", a.step_ms},
          {"verdict", a.verdict},
          {"causes", causes},
          {"replay", replay_json(a.replay)},
          {"flags", flags},
          {"ranks", ranks},
          {"gpu", gpu},
          {"cpu", cpu},
          {"problems", a.problems}};
}

std::string analysis_text(const Analysis& a) {
  std::string out = "verdict: " + a.verdict + "\n";
  out += fmt("%d rank(s), %llu step(s) analysed (%llu warm-up skipped), mean step %.3f ms\n", a.world,
             static_cast<unsigned long long>(a.steps), static_cast<unsigned long long>(a.warmup_steps), a.step_ms);
  if (a.world > kRanksListedInFull)
    return out + causes_text_grouped(a) + flags_text_grouped(a) + ranks_text_summarised(a) + gpu_text_summarised(a) +
           problems_text_capped(a);
  out += "\ncauses (ranked by time lost):\n";
  if (a.causes.empty()) out += "  none above " + fmt("%.0f%%", 100 * kMinCauseShare) + " of step time\n";
  int i = 0;
  for (const StallCause& c : a.causes) {
    std::string who = c.rank < 0 ? std::string("all ranks") : fmt("rank %d", c.rank);
    out += fmt("  %d. %s %s: %.2f ms lost (%.2f ms/step, %.1f%% of step time); worst at step %u, rank %d, +%.6f s\n",
               ++i, who.c_str(), c.stage.c_str(), c.lost_ms, c.lost_ms_per_step, 100 * c.share, c.at_step, c.at_rank,
               static_cast<double>(c.at_ns) / 1e9);
    out += "     " + c.explanation + "\n";
    if (c.what_if_step_ms >= 0 && c.evidence.contains("enough_cores"))
      out +=
          fmt("     on enough cores (cores=%g): %.3f ms a step, replayed%s\n", c.evidence["enough_cores"].get<double>(),
              c.what_if_step_ms, a.replay.trusted ? "" : " (untrusted: see replay)");
    else if (c.evidence.contains("hidden_by"))
      for (const auto& h : c.evidence["hidden_by"])
        out += fmt("     with %s: %.3f ms a step, replayed%s\n", h["edit"].get<std::string>().c_str(),
                   h["step_ms"].get<double>(), a.replay.trusted ? "" : " (untrusted: see replay)");
    else if (c.what_if_step_ms >= 0)
      out += fmt("     without it (this rank's %s as on the median rank): %.3f ms a step, replayed%s\n",
                 c.stage.c_str(), c.what_if_step_ms, a.replay.trusted ? "" : " (untrusted: see replay)");
    std::string vs;
    for (const StallVictim& v : c.victims)
      vs += fmt("%srank %d %s %.2f ms", vs.empty() ? "" : ", ", v.rank, v.stage.c_str(), v.ms);
    out += "     victims: " + vs + "\n";
  }
  out += replay_text(a.replay);
  if (!a.cpu.empty()) {
    out += "\ncpu (the spans' time on a CPU and waiting for a core; docs/stalls.md \"The cores\"):\n";
    for (const HostCpu& h : a.cpu) out += host_cpu_text(h);
  }
  out += "\nflags:\n";
  if (a.flags.empty()) out += "  none\n";
  for (const StallFlag& f : a.flags) out += "  [" + f.id + "] " + f.message + "\n";
  out += "\nranks:\n";
  for (const RankAnalysis& r : a.ranks) {
    out +=
        fmt("  rank %d: %llu steps, step %.3f ms, wait_data %.3f ms, wait_comm %.3f ms, skew %.3f ms, overlap %.0f%%\n",
            r.rank, static_cast<unsigned long long>(r.steps), r.step_ms, r.wait_data_ms, r.wait_comm_ms, r.skew_ms,
            r.overlap_pct);
    // The allreduce's busy time (the union of its buckets' transfers) is not the stage's sum of spans below: buckets
    // overlap one another.
    if (r.allreduce.count_per_step > 0 && r.allreduce.sizes_known)
      out +=
          fmt("    allreduce: %.1f buckets/step, %.3f MB/step, busy %.3f ms/step, algbw %.3f GB/s, busbw %.3f GB/s\n",
              r.allreduce.count_per_step, r.allreduce.bytes_per_step / 1e6, r.allreduce.time_ms_per_step,
              r.allreduce.algbw_gbps, r.allreduce.busbw_gbps);
    else if (r.allreduce.count_per_step > 0)
      out += fmt(
          "    allreduce: %.1f buckets/step, busy %.3f ms/step; message sizes are not in the trace, so neither "
          "are bandwidths (PyTorch's profiler writes them with record_shapes=True, in record_param_comms: NCCL; Gloo "
          "on CPU writes none)\n",
          r.allreduce.count_per_step, r.allreduce.time_ms_per_step);
    if (r.loader.batches > 0)
      out +=
          fmt("    loader: %d worker(s), %.3f ms/batch (supply every %.3f ms, demand every %.3f ms, utilization "
              "%.2f)\n",
              r.loader.workers, r.loader.batch_ms, r.loader.supply_ms_per_batch, r.loader.demand_ms_per_batch,
              r.loader.utilization);
    std::string st;
    for (const auto& [name, v] : r.stages_ms_per_step) st += fmt(" %s %.3f", name.c_str(), v);
    out += "    ms/step (sum of each stage's spans):" + st + "\n";
  }
  if (!a.gpu.empty()) {
    out += "\ngpu (device time over each rank's GPU window; docs/stalls.md \"GPU time\"):\n";
    for (const GpuTime& g : a.gpu) {
      out +=
          fmt("  rank %d: %llu records on %zu streams over %.3f ms: compute %.3f ms, communication %.3f ms, memory "
              "%.3f ms, idle %.3f ms (%.1f%%)\n",
              g.rank, static_cast<unsigned long long>(g.records), g.streams, g.window_ms, g.compute_ms,
              g.communication_ms, g.memory_ms, g.idle_ms, g.window_ms > 0 ? 100 * g.idle_ms / g.window_ms : 0.0);
      if (g.comm_compute_overlap >= 0)
        out += fmt("    comm/compute overlap %.1f%% (%.3f ms of %.3f ms communication under compute)\n",
                   100 * g.comm_compute_overlap, g.overlap_ms, g.communication_ms);
      out += fmt("    stream gaps: host wait %.3f ms, kernel wait %.3f ms, other %.3f ms\n", g.stream_gaps.host_wait_ms,
                 g.stream_gaps.kernel_wait_ms, g.stream_gaps.other_ms);
    }
  }
  if (!a.problems.empty()) {
    out += "\nproblems:\n";
    for (const std::string& p : a.problems) out += "  " + p + "\n";
  }
  return out;
}

}  // namespace ddp
