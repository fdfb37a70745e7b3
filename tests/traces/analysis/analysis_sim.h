#pragma once
// What the stall-analysis tests share: a small discrete-event model of two (or more) DDP ranks (loader workers with
// bounded prefetch, the main thread's micro-steps, bucketed allreduce that completes only when every rank launched
// the bucket) that writes real native traces through TraceWriter, and analyze() run on them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "tests/support/test_manifest.h"
#include "traces/analysis/analysis.h"
#include "traces/model/run_folder.h"
#include "traces/model/span_cpu.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"

namespace fs = std::filesystem;

namespace analysis_test {

struct RankKnobs {
  double disk_read = 1.0, transform = 1.0, pin = 0.5;  // ms per batch on a loader worker
  double h2d = 0.5, forward = 5.0, backward = 10.0;    // ms per micro-step on the main thread
  double backward_tail = 0;  // ms inside backward after every bucket launched (the runtime's --slow backward sleep)
  double optimizer = 1.0;    // ms per step
  double checkpoint = 0;     // ms, after the optimizer of every 2nd step (0 = none)
  double wait_gpu = 0;       // ms per step the host waits for its GPU after the optimizer (GPU runs; 0 = no span)
  double untracked = 0;      // ms of main-thread time outside any span, per step
  uint64_t h2d_bytes = 4u << 20;
  double rss_base_mb = 1000, rss_growth_mb_per_step = 0, rss_warmup_mb = 0;
  int64_t clock_offset_ns = 0;  // rank-0 time = local time + offset
  double late_ms = 0;           // extra forward time on every `late_every`-th step (a peer arriving late now and then)
  int late_every = 0;
  double burst_ms = 0;  // extra disk_read of every `burst_every`-th batch (a shard opened, a cold cache)
  int burst_every = 0;
  // With Sim::cores: the share of every working span's wall (not wait_data, wait_comm) its thread spent runnable,
  // waiting for a core, on the training thread and on the loader's workers; the rest it was on one. -1: the kernel
  // said no wait (CPU time only).
  double wait_share = 0, loader_wait_share = 0;
};

struct Sim {
  int world = 2;
  int steps = 20;
  int accum = 1;
  int workers = 2;
  int prefetch = 2;
  int buckets = 4;
  uint64_t bucket_bytes = 25u << 20;
  double comm_ms = 0.3;     // transfer time of one bucket once every rank launched it
  double comm_tail_ms = 0;  // extra time of every collective of every `comm_tail_every`-th step, all ranks present
  int comm_tail_every = 0;
  std::string backend;  // the manifest's "backend" (none when empty)
  bool sync_every_step = false;
  bool pinned = true;
  bool manifest = true;
  bool step_spans = true;
  bool loader_spans = true;
  bool complete = true;
  uint64_t dropped = 0;
  double jitter = 0.02;  // relative, deterministic
  int cores = 0;         // > 0: every span carries its CPU split (RankKnobs::wait_share) and the manifest the cores
  std::vector<RankKnobs> rank = std::vector<RankKnobs>(2);
  // From step `change_at` on (when set), each rank runs with `rank_after` instead: a run that changes mid-way.
  int change_at = -1;
  std::vector<RankKnobs> rank_after;
};

// Rank r's knobs at step s.
inline const RankKnobs& knobs(const Sim& sim, int r, int s) {
  return sim.change_at >= 0 && s >= sim.change_at ? sim.rank_after[r] : sim.rank[r];
}

inline constexpr int64_t kMs = 1000000;

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int n = 0;
    path_ = fs::temp_directory_path() /
            ("ddp_analysis_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

struct Writer {
  std::map<uint8_t, std::vector<ddp::Event>> lanes;
  void span(uint8_t lane, ddp::Stage st, int64_t t0, int64_t t1, uint32_t step, uint8_t micro, uint32_t item = 0,
            uint64_t value = 0, uint16_t bucket = ddp::kNoBucket) {
    ddp::Event e = ddp::make_span(st, lane, t0, t1);
    e.step = step, e.micro = micro, e.item = item, e.value = value, e.bucket = bucket;
    lanes[lane].push_back(e);
  }
  void counter(uint8_t lane, ddp::Counter c, int64_t t, uint64_t v) {
    ddp::Event e;
    e.t0 = e.t1 = t, e.value = v;
    e.stage = static_cast<uint8_t>(c);
    e.kind = static_cast<uint8_t>(ddp::EventKind::counter);
    e.lane = lane;
    lanes[lane].push_back(e);
  }
};

inline constexpr uint8_t kMain = 0, kComm = 1, kMemory = 2, kLoader0 = 3;

// Each span of `evs` followed by its CPU split, as the recorder writes them: a working span `wait_share` of its wall
// waiting for a core and the rest on one (-1: on a CPU, wait not known); a wait or a step span blocked.
inline std::vector<ddp::Event> with_cpu_splits(const std::vector<ddp::Event>& evs, double wait_share) {
  std::vector<ddp::Event> out;
  for (const ddp::Event& e : evs) {
    out.push_back(e);
    if (!e.is_span()) continue;
    const ddp::Stage st = e.stage_id();
    const bool blocked = st == ddp::Stage::wait_data || st == ddp::Stage::wait_comm || st == ddp::Stage::step ||
                         st == ddp::Stage::allreduce;
    const double wall = static_cast<double>(e.duration());
    const double wait = blocked || wait_share < 0 ? 0 : wall * wait_share;
    const double cpu = blocked ? 0 : wall - wait;
    out.push_back(ddp::cpu_event(e, static_cast<uint64_t>(cpu), wait_share < 0 ? -1 : static_cast<int64_t>(wait)));
  }
  return out;
}

// Writes the run into `dir`. Times are simulated on the common clock and written on each rank's local clock.
inline void simulate(const Sim& sim, const std::string& dir) {
  const int W = sim.world;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto jit = [&](double v_ms) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>((rng >> 11) & 0xFFFFF) / static_cast<double>(0xFFFFF) * 2 - 1;  // -1..1
    return static_cast<int64_t>(v_ms * (1 + sim.jitter * u) * kMs);
  };
  const int batches = sim.steps * sim.accum;
  const int Q = sim.workers * sim.prefetch;
  std::vector<Writer> w(static_cast<size_t>(W));
  std::vector<std::vector<int64_t>> ready(W, std::vector<int64_t>(batches, 0)), consumed = ready;
  std::vector<int> produced(W, 0);
  std::vector<std::vector<int64_t>> worker_free(W, std::vector<int64_t>(sim.workers, 0));
  std::vector<int64_t> t(W, 0), step_start(W, 0);
  auto produce = [&](int r, int upto) {
    for (int j = produced[r]; j <= upto; ++j) {
      const RankKnobs& k = knobs(sim, r, j / sim.accum);
      int wk = j % sim.workers;
      int64_t s = std::max(worker_free[r][wk], j >= Q ? consumed[r][j - Q] : 0);
      uint8_t lane = static_cast<uint8_t>(kLoader0 + wk);
      uint32_t dst = static_cast<uint32_t>(j / sim.accum);
      uint8_t micro = static_cast<uint8_t>(j % sim.accum);  // the micro-step it feeds, as the runtime's loader records
      const bool burst = k.burst_every > 0 && (j + 1) % k.burst_every == 0;
      int64_t a = s, b = a + jit(k.disk_read + (burst ? k.burst_ms : 0));
      w[r].span(lane, ddp::Stage::disk_read, a, b, dst, micro, j, 1 << 20);
      a = b, b = a + jit(k.transform);
      w[r].span(lane, ddp::Stage::transform, a, b, dst, micro, j);
      a = b, b = a + jit(k.pin);
      w[r].span(lane, ddp::Stage::pin, a, b, dst, micro, j, 1 << 20);
      ready[r][j] = b;
      worker_free[r][wk] = b;
      if (!sim.loader_spans) w[r].lanes[lane].resize(w[r].lanes[lane].size() - 3);
    }
    produced[r] = std::max(produced[r], upto + 1);
  };
  for (int s = 0; s < sim.steps; ++s) {
    for (int r = 0; r < W; ++r) step_start[r] = t[r];
    for (int m = 0; m < sim.accum; ++m) {
      const bool last = m == sim.accum - 1;
      const bool sync = last || sim.sync_every_step;
      std::vector<std::vector<int64_t>> launch(W, std::vector<int64_t>(sim.buckets, 0));
      std::vector<int64_t> bwd_end(W, 0);
      for (int r = 0; r < W; ++r) {
        const RankKnobs& k = knobs(sim, r, s);
        const int i = s * sim.accum + m;
        produce(r, i);
        int64_t a = t[r], b = std::max(t[r], ready[r][i]);
        w[r].span(kMain, ddp::Stage::wait_data, a, b, s, m, i);
        consumed[r][i] = b;
        a = b, b = a + jit(k.h2d);
        w[r].span(kMain, ddp::Stage::h2d, a, b, s, m, i, k.h2d_bytes);
        a = b, b = a + jit(k.forward + (k.late_every && s % k.late_every == 0 ? k.late_ms : 0));
        w[r].span(kMain, ddp::Stage::forward, a, b, s, m);
        a = b, b = a + jit(k.backward);
        w[r].span(kMain, ddp::Stage::backward, a, b, s, m);
        for (int q = 0; q < sim.buckets; ++q) launch[r][q] = a + (b - a) * (q + 1) / sim.buckets;
        b += jit(k.backward_tail);
        w[r].lanes[kMain].back().t1 = b;
        bwd_end[r] = b;
        t[r] = b;
        // queue depth: batches ready but not yet taken
        int depth = 0;
        for (int j = i + 1; j < produced[r]; ++j) depth += ready[r][j] <= b;
        w[r].counter(kMemory, ddp::Counter::loader_queue_depth, b, static_cast<uint64_t>(depth));
      }
      if (sync) {
        int64_t done = 0;
        for (int q = 0; q < sim.buckets; ++q) {
          int64_t start = done;
          for (int r = 0; r < W; ++r) start = std::max(start, launch[r][q]);
          const bool tail = sim.comm_tail_every && s % sim.comm_tail_every == 0;
          done = start + static_cast<int64_t>((sim.comm_ms + (tail ? sim.comm_tail_ms : 0)) * kMs);
          for (int r = 0; r < W; ++r)
            w[r].span(kComm, ddp::Stage::allreduce, launch[r][q], done, s, m, 0, sim.bucket_bytes,
                      static_cast<uint16_t>(q));
        }
        for (int r = 0; r < W; ++r) {
          int64_t end = std::max(bwd_end[r], done);
          w[r].span(kMain, ddp::Stage::wait_comm, bwd_end[r], end, s, m);
          t[r] = end;
        }
      }
      if (last) {
        for (int r = 0; r < W; ++r) {
          const RankKnobs& k = knobs(sim, r, s);
          int64_t a = t[r], b = a + jit(k.optimizer);
          w[r].span(kMain, ddp::Stage::optimizer, a, b, s, m);
          if (k.wait_gpu > 0) {
            a = b, b = a + jit(k.wait_gpu);
            w[r].span(kMain, ddp::Stage::wait_gpu, a, b, s, m);
          }
          if (k.checkpoint > 0 && s % 2 == 1) {
            a = b, b = a + jit(k.checkpoint);
            w[r].span(kMain, ddp::Stage::checkpoint, a, b, s, m);
          }
          b += jit(k.untracked);
          t[r] = b;
          if (sim.step_spans) w[r].span(kMain, ddp::Stage::step, step_start[r], b, s, 0);
          double rss = k.rss_base_mb + k.rss_growth_mb_per_step * s + (s >= 2 ? k.rss_warmup_mb : 0);
          w[r].counter(kMemory, ddp::Counter::host_rss_bytes, b, static_cast<uint64_t>(rss * (1 << 20)));
        }
      }
    }
  }
  for (int r = 0; r < W; ++r) {
    ddp::TraceWriter tw;
    std::string err;
    ASSERT_TRUE(tw.open((fs::path(dir) / ddp::rank_trace_file(r)).string(), r, W, err)) << err;
    tw.write_lane(kMain, "main");
    tw.write_lane(kComm, "comm");
    tw.write_lane(kMemory, "memory");
    for (int k = 0; k < sim.workers; ++k)
      tw.write_lane(static_cast<uint8_t>(kLoader0 + k), "loader/" + std::to_string(k));
    ddp::format::ClockPayload clock{sim.rank[r].clock_offset_ns, 1000, 0, 0, 8};
    tw.write_clock(clock);
    uint64_t n = 0;
    for (auto& [lane, evs] : w[r].lanes) {
      for (ddp::Event& e : evs) e.t0 -= sim.rank[r].clock_offset_ns, e.t1 -= sim.rank[r].clock_offset_ns;
      if (sim.cores > 0)
        evs = with_cpu_splits(evs, lane >= kLoader0 ? sim.rank[r].loader_wait_share : sim.rank[r].wait_share);
      tw.write_events(lane, evs.data(), evs.size());
      n += evs.size();
    }
    if (sim.complete) tw.write_end(n, sim.dropped);
    tw.close();
  }
  if (sim.manifest) {
    nlohmann::json manifest = ddp::testing::our_job_manifest_json(W);
    nlohmann::json& cfg = manifest["config"];
    cfg["batch_size"] = 32;
    cfg["accum_steps"] = sim.accum;
    cfg["bucket_mb"] = static_cast<double>(sim.bucket_bytes) / (1 << 20);
    cfg["workers"] = sim.workers;
    cfg["sync_every_step"] = sim.sync_every_step;
    cfg["pinned"] = sim.pinned;
    if (sim.cores > 0) {
      nlohmann::json cpus = nlohmann::json::array();
      for (int c = 0; c < sim.cores; ++c) cpus.push_back(c);
      for (auto& rk : manifest["ranks"])
        rk["cpu"] = {{"cores_online", sim.cores}, {"cpus_allowed", cpus}, {"intra_op_threads", 1}};
    }
    if (sim.backend.empty())
      manifest.erase("backend");
    else
      manifest["backend"] = sim.backend;
    std::ofstream(fs::path(dir) / ddp::kManifestFile) << manifest.dump(2);
  }
}

inline ddp::Analysis run_analysis(const Sim& sim, const std::string& tag, ddp::RunTrace* keep = nullptr) {
  TempDir dir(tag);
  simulate(sim, dir.str());
  ddp::RunTrace run;
  std::string err;
  EXPECT_TRUE(ddp::load_run(dir.str(), run, err)) << err;
  ddp::Analysis a = ddp::analyze(run);
  if (std::getenv("DDP_ANALYSIS_PRINT")) std::printf("---- %s\n%s", tag.c_str(), ddp::analysis_text(a).c_str());
  if (keep) *keep = std::move(run);
  return a;
}

inline bool has_flag(const ddp::Analysis& a, const std::string& id, int rank = -2) {
  for (const auto& f : a.flags)
    if (f.id == id && (rank == -2 || f.rank == rank)) return true;
  return false;
}

inline std::string describe(const ddp::Analysis& a) { return ddp::analysis_text(a); }

}  // namespace analysis_test
