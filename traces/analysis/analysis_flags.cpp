#include "traces/analysis/analysis_flags.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

#include "traces/analysis/analysis_measures.h"
#include "traces/analysis/analysis_thresholds.h"
#include "traces/analysis/memory_growth.h"
#include "traces/base/stats.h"
#include "traces/base/text_format.h"

namespace ddp::analysis_detail {
namespace {

// What the manifest says about the settings the flags judge; -1 where it says nothing.
struct FlagSettings {
  int pinned = -1;
  double accum_steps = 0;
  int sync_every_step = -1;
};

void add_flag(Analysis& a, const char* id, int rank, std::string msg, nlohmann::json ev) {
  a.flags.push_back({id, rank, std::move(msg), std::move(ev)});
}

void flag_trace_damage(Analysis& a, const RankAnalysis& r) {
  if (!r.complete)
    add_flag(a, "trace_incomplete", r.rank,
             fmt("rank %d: the trace was not closed cleanly (the rank crashed or was killed)", r.rank), {});
  if (r.dropped)
    add_flag(a, "events_dropped", r.rank,
             fmt("rank %d: %llu events were dropped (recorder buffers full); numbers undercount", r.rank,
                 static_cast<unsigned long long>(r.dropped)),
             {{"dropped", r.dropped}});
}

void flag_pageable_h2d(Analysis& a, const RankAnalysis& r, int pinned) {
  const double h2d_ms = stage_ms(r, Stage::h2d);
  const double h2d_share = r.step_ms > 0 ? h2d_ms / r.step_ms : 0;
  if (h2d_ms > 0 &&
      (pinned == 0 || (pinned < 0 && r.h2d_gbps < kPageableH2dMaxGbps && h2d_share >= kPageableH2dMinShare)))
    add_flag(a, "pageable_h2d", r.rank,
             fmt("rank %d: host-to-device copies %s: %.2f ms/step (%.1f%% of the step) at %.2f GB/s", r.rank,
                 pinned == 0 ? "use pageable memory (pinned=false)" : "are slow, as if from pageable memory", h2d_ms,
                 100 * h2d_share, r.h2d_gbps),
             {{"pinned", pinned < 0 ? nlohmann::json(nullptr) : nlohmann::json(pinned == 1)},
              {"h2d_ms_per_step", h2d_ms},
              {"h2d_gbps", r.h2d_gbps},
              {"share", h2d_share}});
}

void flag_sync_every_micro_step(Analysis& a, const RankData& d, const RankAnalysis& r, const FlagSettings& set) {
  const double accum = set.accum_steps >= 1 ? set.accum_steps : std::round(r.micro_steps);
  if (accum <= 1) return;
  uint64_t early = 0;
  if (set.accum_steps >= 1) {
    // Our own runs tag each collective with its micro-step.
    for (const Span& s : d.allreduce)
      if (d.in(s.step) && s.micro + 1 < accum) early++;
  } else if (r.allreduce.syncs_per_step > 1.5) {
    // A user's trace carries no micro-step on its collectives (every span says micro 0): a backward that synced on
    // more than one micro-step of the step is what shows no_sync missing.
    early = static_cast<uint64_t>(std::llround((r.allreduce.syncs_per_step - 1) * static_cast<double>(r.steps)));
  }
  if (early > 0 || set.sync_every_step == 1)
    add_flag(a, "sync_every_micro_step", r.rank,
             fmt("rank %d: gradient accumulation over %.0f micro-steps allreduces %.1f times per step instead of "
                 "once (no no_sync on the first micro-steps)",
                 r.rank, accum, r.allreduce.syncs_per_step),
             {{"accum_steps", accum},
              {"syncs_per_step", r.allreduce.syncs_per_step},
              {"early_allreduces_per_step", static_cast<double>(early) / static_cast<double>(r.steps)}});
}

void flag_tiny_buckets(Analysis& a, const RankAnalysis& r, const records::job_config* job) {
  if (r.allreduce.syncs_per_step <= 0) return;
  double per_sync = r.allreduce.count_per_step / r.allreduce.syncs_per_step;
  double mb = r.allreduce.mean_bucket_bytes / (1 << 20);
  if (per_sync > kTinyBucketsMaxPerSync || (per_sync >= kTinyBucketsMinPerSync && mb < kTinyBucketMaxMiB)) {
    nlohmann::json ev = {{"buckets_per_sync", per_sync}, {"mean_bucket_bytes", r.allreduce.mean_bucket_bytes}};
    if (job) ev["bucket_mb"] = job->bucket_mb;
    add_flag(a, "tiny_buckets", r.rank,
             fmt("rank %d: %.1f allreduces per sync averaging %.3f MiB; per-call latency dominates (raise "
                 "--bucket-mb)",
                 r.rank, per_sync, mb),
             ev);
  }
}

void flag_loader_cannot_keep_up(Analysis& a, const RankAnalysis& r) {
  const LoaderStats& L = r.loader;
  const double wd_share = r.step_ms > 0 ? r.wait_data_ms / r.step_ms : 0;
  const bool second_sign = L.utilization > kLoaderMaxUtilization || L.queue_empty_fraction >= kLoaderQueueEmptyFraction;
  // Waits while workers start are the start-up's (its own cause, worker_start); a loader that keeps up is not flagged
  // for the waits that remain (they are charged to wait_data, said as arriving late).
  const double batch_wait_share = r.step_ms > 0 ? std::max(0.0, r.wait_data_ms - L.start_wait_ms) / r.step_ms : 0;
  const bool keeps_up = L.batches > 0 && L.utilization > 0 && L.utilization <= kLoaderKeepsUpUtilization;
  if (keeps_up) return;
  if (batch_wait_share >= kLoaderWaitShare || (batch_wait_share >= kLoaderWaitMinShare && second_sign))
    add_flag(a, "loader_cannot_keep_up", r.rank,
             fmt("rank %d: compute waits for input %.2f ms/step (%.1f%% of the step); %s", r.rank, r.wait_data_ms,
                 100 * wd_share, L.batches > 0 ? loader_supply_text(L).c_str() : "no loader spans were recorded"),
             {{"wait_data_ms_per_step", r.wait_data_ms},
              {"share", wd_share},
              {"loader_utilization", L.utilization},
              {"queue_empty_fraction",
               L.queue_empty_fraction >= 0 ? nlohmann::json(L.queue_empty_fraction) : nlohmann::json(nullptr)}});
}

// memory_growth.h's rule with the counters' marks (kCounterGrowth), warm-up the first tenth of the sampled time.
void flag_memory_growth(Analysis& a, const RankData& d, Counter c) {
  const auto& s = d.counters[static_cast<int>(c)];
  if (s.size() < kMemoryMinSamples) return;
  int64_t t_a = s.front().t, t_b = s.back().t;
  int64_t cut = t_a + (t_b - t_a) / kMemoryWarmupParts;  // warm-up (allocator, first batches)
  std::vector<double> v;
  for (const Sample& x : s)
    if (x.t >= cut) v.push_back(static_cast<double>(x.v));
  if (v.size() < kMemoryMinSamplesAfterWarmup) return;
  const MemoryGrowth g = memory_growth(v, kCounterGrowth);
  if (!g.grows) return;
  const double m1 = g.part_medians[0], m2 = g.part_medians[1], m3 = g.part_medians[2], growth = g.rise;
  std::string what = c == Counter::host_rss_bytes ? "host RSS" : std::string(counter_name(c));
  add_flag(a, "memory_growth", d.rank,
           fmt("rank %d: %s grows steadily from %.1f to %.1f MiB (+%.0f%%) over the run", d.rank, what.c_str(),
               m1 / (1 << 20), m3 / (1 << 20), 100.0 * growth / std::max(1.0, m1)),
           {{"counter", std::string(counter_name(c))},
            {"first_third_median_bytes", m1},
            {"middle_third_median_bytes", m2},
            {"last_third_median_bytes", m3},
            {"growth_bytes", growth}});
}

// The time each collective took once every rank had launched it: from the last rank's launch to the first rank's
// completion, on the common clock. Waiting for a late peer is left out (the root-cause analysis names that peer), so
// what remains is the backend's own time. One entry per bucket of an analysed step that every rank recorded.
std::vector<double> collective_own_ms(const std::vector<RankData>& data) {
  std::vector<double> out;
  if (data.size() < 2) return out;
  // Every other rank's collectives by bucket key: launch and completion.
  std::vector<std::unordered_map<uint64_t, Interval>> by_key(data.size());
  for (size_t r = 1; r < data.size(); ++r)
    for (const Span& x : data[r].allreduce)
      if (data[r].in(x.step)) by_key[r][bucket_key(x.step, x.micro, x.bucket)] = {x.t0, x.t1};
  for (const Span& s : data.front().allreduce) {
    if (!data.front().in(s.step)) continue;
    const uint64_t key = bucket_key(s.step, s.micro, s.bucket);
    int64_t last_launch = s.t0, first_done = s.t1;
    bool everywhere = true;
    for (size_t r = 1; r < data.size() && everywhere; ++r) {
      auto it = by_key[r].find(key);
      everywhere = it != by_key[r].end();
      if (everywhere) {
        last_launch = std::max(last_launch, it->second.t0);
        first_done = std::min(first_done, it->second.t1);
      }
    }
    if (everywhere && first_done > last_launch) out.push_back(ms(static_cast<double>(first_done - last_launch)));
  }
  return out;
}

void flag_collective_tail(Analysis& a, const std::vector<RankData>& data, const std::string& backend) {
  if (a.steps == 0 || a.step_ms <= 0) return;
  std::vector<double> own = collective_own_ms(data);
  if (own.size() < kCollectiveTailMinCollectives) return;
  const double med = median(own), p90 = percentile(own, 0.9);
  double above = 0;
  for (double x : own) above += std::max(0.0, x - med);
  const double above_per_step = above / static_cast<double>(a.steps);
  const double share = above_per_step / a.step_ms;
  if (p90 < kCollectiveTailP90OverMedian * med || p90 - med < kCollectiveTailMinExcessMs ||
      share < kCollectiveTailMinShare)
    return;
  // What usually makes such a tail, by backend (docs/stalls.md "collective_tail").
  const char* gloo =
      "with Gloo on CPU ranks that share cores, its event-loop thread can preempt the worker holding a "
      "connection's lock and spin for a whole scheduler slice: give each rank its own cores and run it "
      "under SCHED_BATCH (chrt -b 0 torchrun ...)";
  const char* nccl = "with NCCL, look at the interconnect and NCCL's own threads (NCCL_DEBUG=INFO)";
  const std::string advice = backend == "gloo" ? gloo : backend == "nccl" ? nccl : std::string(gloo) + "; " + nccl;
  add_flag(a, "collective_tail", -1,
           fmt("collectives stall after every rank has launched them: median %.2f ms, p90 %.2f ms over %zu; the time "
               "above the median costs %.2f ms/step (%.0f%% of the step) and is the backend's own, no rank waits "
               "for a peer then; %s",
               med, p90, own.size(), above_per_step, 100 * share, advice.c_str()),
           {{"collectives", own.size()},
            {"median_ms", med},
            {"p90_ms", p90},
            {"max_ms", *std::max_element(own.begin(), own.end())},
            {"above_median_ms_per_step", above_per_step},
            {"share", share},
            {"backend", backend.empty() ? nlohmann::json(nullptr) : nlohmann::json(backend)}});
}

}  // namespace

void add_flags(Analysis& a, const std::vector<RankData>& data, const records::job_config* job,
               const std::string& backend) {
  FlagSettings set;
  // Of our own job the settings are known; of a user's the flags go by what the spans show (-1, 0: unknown).
  set.pinned = job ? job->pinned : -1;
  set.accum_steps = job ? static_cast<double>(job->accum_steps) : 0;
  set.sync_every_step = job ? job->sync_every_step : -1;
  for (size_t i = 0; i < data.size(); ++i) {
    const RankData& d = data[i];
    const RankAnalysis& r = a.ranks[i];
    flag_trace_damage(a, r);
    if (!r.steps) continue;
    flag_pageable_h2d(a, r, set.pinned);
    flag_sync_every_micro_step(a, d, r, set);
    flag_tiny_buckets(a, r, job);
    flag_loader_cannot_keep_up(a, r);
    flag_memory_growth(a, d, Counter::host_rss_bytes);
    flag_memory_growth(a, d, Counter::cuda_allocated_bytes);
  }
  flag_collective_tail(a, data, backend);
}

}  // namespace ddp::analysis_detail
