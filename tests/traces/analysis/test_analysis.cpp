// Stall analysis on synthetic runs: a small discrete-event model of two (or more) DDP ranks (loader workers with
// bounded prefetch, the main thread's micro-steps, bucketed allreduce that completes only when every rank launched
// the bucket) writes real native traces through TraceWriter; the tests plant one pattern and check what analyze()
// names, and that a balanced run names nothing.
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

#include "traces/analysis/analysis.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"

namespace fs = std::filesystem;

namespace {

struct RankKnobs {
  double disk_read = 1.0, transform = 1.0, pin = 0.5;  // ms per batch on a loader worker
  double h2d = 0.5, forward = 5.0, backward = 10.0;    // ms per micro-step on the main thread
  double backward_tail = 0;  // ms inside backward after every bucket launched (the runtime's --slow backward sleep)
  double optimizer = 1.0;                               // ms per step
  double checkpoint = 0;                                // ms, after the optimizer of every 2nd step (0 = none)
  double wait_gpu = 0;  // ms per step the host waits for its GPU after the optimizer (GPU runs; 0 = no span)
  double untracked = 0;                                 // ms of main-thread time outside any span, per step
  uint64_t h2d_bytes = 4u << 20;
  double rss_base_mb = 1000, rss_growth_mb_per_step = 0, rss_warmup_mb = 0;
  int64_t clock_offset_ns = 0;  // rank-0 time = local time + offset
  double late_ms = 0;  // extra forward time on every `late_every`-th step (a peer arriving late now and then)
  int late_every = 0;
};

struct Sim {
  int world = 2;
  int steps = 20;
  int accum = 1;
  int workers = 2;
  int prefetch = 2;
  int buckets = 4;
  uint64_t bucket_bytes = 25u << 20;
  double comm_ms = 0.3;  // transfer time of one bucket once every rank launched it
  double comm_tail_ms = 0;  // extra time of every collective of every `comm_tail_every`-th step, all ranks present
  int comm_tail_every = 0;
  std::string backend;  // the manifest's "backend" (none when empty)
  bool sync_every_step = false;
  std::optional<bool> pinned = true;
  bool manifest = true;
  bool step_spans = true;
  bool loader_spans = true;
  bool complete = true;
  uint64_t dropped = 0;
  double jitter = 0.02;  // relative, deterministic
  std::vector<RankKnobs> rank = std::vector<RankKnobs>(2);
};

constexpr int64_t kMs = 1000000;

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

constexpr uint8_t kMain = 0, kComm = 1, kMemory = 2, kLoader0 = 3;

// Writes the run into `dir`. Times are simulated on the common clock and written on each rank's local clock.
void simulate(const Sim& sim, const std::string& dir) {
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
    const RankKnobs& k = sim.rank[r];
    for (int j = produced[r]; j <= upto; ++j) {
      int wk = j % sim.workers;
      int64_t s = std::max(worker_free[r][wk], j >= Q ? consumed[r][j - Q] : 0);
      uint8_t lane = static_cast<uint8_t>(kLoader0 + wk);
      uint32_t dst = static_cast<uint32_t>(j / sim.accum);
      int64_t a = s, b = a + jit(k.disk_read);
      w[r].span(lane, ddp::Stage::disk_read, a, b, dst, 0, j, 1 << 20);
      a = b, b = a + jit(k.transform);
      w[r].span(lane, ddp::Stage::transform, a, b, dst, 0, j);
      a = b, b = a + jit(k.pin);
      w[r].span(lane, ddp::Stage::pin, a, b, dst, 0, j, 1 << 20);
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
        const RankKnobs& k = sim.rank[r];
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
          const RankKnobs& k = sim.rank[r];
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
      tw.write_events(lane, evs.data(), evs.size());
      n += evs.size();
    }
    if (sim.complete) tw.write_end(n, sim.dropped);
    tw.close();
  }
  if (sim.manifest) {
    nlohmann::json cfg = {{"batch_size", 32},
                          {"accum_steps", sim.accum},
                          {"bucket_mb", static_cast<double>(sim.bucket_bytes) / (1 << 20)},
                          {"workers", sim.workers},
                          {"sync_every_step", sim.sync_every_step}};
    if (sim.pinned) cfg["pinned"] = *sim.pinned;
    nlohmann::json manifest = {{"world_size", W}, {"config", cfg}};
    if (!sim.backend.empty()) manifest["backend"] = sim.backend;
    std::ofstream(fs::path(dir) / ddp::kManifestFile) << manifest.dump(2);
  }
}

ddp::Analysis run_analysis(const Sim& sim, const std::string& tag, ddp::RunTrace* keep = nullptr) {
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

bool has_flag(const ddp::Analysis& a, const std::string& id, int rank = -2) {
  for (const auto& f : a.flags)
    if (f.id == id && (rank == -2 || f.rank == rank)) return true;
  return false;
}

std::string describe(const ddp::Analysis& a) { return ddp::analysis_text(a); }

}  // namespace

TEST(Analysis, BalancedRunNamesNoDominantStallAndNoFlags) {
  Sim sim;
  ddp::Analysis a = run_analysis(sim, "balanced");
  EXPECT_EQ(a.world, 2);
  EXPECT_EQ(a.steps, 19u);
  EXPECT_EQ(a.warmup_steps, 1u);
  ASSERT_EQ(a.ranks.size(), 2u);
  for (const auto& c : a.causes) {
    EXPECT_LT(c.share, ddp::kDominantShare) << describe(a);
    // Only the collective's inherent tail after backward may show; no rank is blamed.
    EXPECT_EQ(c.rank, -1) << describe(a);
    EXPECT_EQ(c.stage, "allreduce") << describe(a);
  }
  EXPECT_EQ(a.verdict.rfind("no dominant stall: compute bound", 0), 0u) << a.verdict;
  EXPECT_TRUE(a.flags.empty()) << describe(a);
  for (const auto& r : a.ranks) {
    EXPECT_EQ(r.steps, 19u);
    EXPECT_NEAR(r.micro_steps, 1.0, 1e-9);
    EXPECT_LT(r.wait_data_ms, 0.2) << describe(a);
    EXPECT_GT(r.overlap_pct, 50.0);
    EXPECT_NEAR(r.allreduce.count_per_step, 4.0, 1e-9);
    EXPECT_NEAR(r.allreduce.bytes_per_step, 4.0 * (25 << 20), 1);
    EXPECT_EQ(r.loader.workers, 2);
    EXPECT_LT(r.loader.utilization, 0.5);
    EXPECT_NEAR(r.stages_ms_per_step.at("forward"), 5.0, 0.2);
  }
}

// Every slow-down knob on every rank: the analysis names that stage on that rank as the top cause.
namespace {
struct Knob {
  const char* stage;
  int rank;
};
void PrintTo(const Knob& k, std::ostream* os) { *os << k.stage << " on rank " << k.rank; }
}  // namespace
class AnalysisKnob : public ::testing::TestWithParam<Knob> {};

TEST_P(AnalysisKnob, TopCauseIsThePlantedStageAndRank) {
  const Knob k = GetParam();
  Sim sim;
  RankKnobs& r = sim.rank[static_cast<size_t>(k.rank)];
  const std::string st = k.stage;
  // Loader stages must be slow enough that two workers cannot keep up (~17 ms of compute per batch).
  if (st == "disk_read") r.disk_read += 60;
  if (st == "transform") r.transform += 60;
  if (st == "pin") r.pin += 60;
  if (st == "h2d") r.h2d += 10;
  if (st == "forward") r.forward += 10;
  if (st == "backward") r.backward_tail += 10;  // as the runtime sleeps: after the buckets launched
  if (st == "optimizer") r.optimizer += 10;
  if (st == "wait_gpu") r.wait_gpu += 10;  // a rank whose GPU is slower: its host waits longer at the read-back
  ddp::Analysis a = run_analysis(sim, std::string("knob_") + k.stage);
  ASSERT_FALSE(a.causes.empty()) << describe(a);
  const ddp::StallCause& top = a.causes.front();
  EXPECT_EQ(top.rank, k.rank) << describe(a);
  EXPECT_EQ(top.stage, st) << describe(a);
  EXPECT_GE(top.share, ddp::kDominantShare) << describe(a);
  EXPECT_NE(a.verdict.find("dominant stall: rank " + std::to_string(k.rank) + " " + st), std::string::npos)
      << a.verdict;
  // The peer is a victim: it waited in allreduce for the slow rank.
  const int peer = 1 - k.rank;
  bool peer_victim = false;
  for (const auto& v : top.victims) peer_victim |= v.rank == peer && v.stage == "wait_comm" && v.ms > 0;
  EXPECT_TRUE(peer_victim) << describe(a);
  EXPECT_GT(a.ranks[static_cast<size_t>(peer)].skew_ms, 5.0) << describe(a);
  // Loader knobs: the slow rank also waits for data itself, and the flag says its loader cannot keep up.
  const bool loader = st == "disk_read" || st == "transform" || st == "pin";
  EXPECT_EQ(has_flag(a, "loader_cannot_keep_up", k.rank), loader) << describe(a);
  EXPECT_FALSE(has_flag(a, "loader_cannot_keep_up", peer)) << describe(a);
  if (loader) {
    EXPECT_GT(top.evidence.at("loader_utilization").get<double>(), 1.0);
    EXPECT_GT(top.evidence.at("loader_ms_per_batch").at(st).get<double>(),
              top.evidence.at("peer_loader_ms_per_batch").at(st).get<double>() + 50);
  } else {
    EXPECT_NEAR(top.evidence.at("excess_ms_per_step").get<double>(), 10.0, 1.0) << top.evidence.dump();
  }
  // lost time ~ the planted slowness per step (the job loses it once, not once per victim)
  double planted = loader ? (60 + 2.5) / 2 - (0.5 + 5 + 10 + 1 + 0.3 * 1.5) : 10;
  EXPECT_GT(top.lost_ms_per_step, 0.6 * planted) << describe(a);
  EXPECT_LT(top.lost_ms_per_step, 1.3 * planted) << describe(a);
}

INSTANTIATE_TEST_SUITE_P(EveryKnobEveryRank, AnalysisKnob,
                         ::testing::Values(Knob{"disk_read", 0}, Knob{"disk_read", 1}, Knob{"transform", 0},
                                           Knob{"transform", 1}, Knob{"pin", 0}, Knob{"pin", 1}, Knob{"h2d", 0},
                                           Knob{"h2d", 1}, Knob{"forward", 0}, Knob{"forward", 1},
                                           Knob{"backward", 0}, Knob{"backward", 1}, Knob{"optimizer", 0},
                                           Knob{"optimizer", 1}, Knob{"wait_gpu", 0}, Knob{"wait_gpu", 1}),
                         [](const ::testing::TestParamInfo<Knob>& i) {
                           return std::string(i.param.stage) + "_rank" + std::to_string(i.param.rank);
                         });

TEST(Analysis, SlowCommunicationIsNamedAsTheCollectiveItself) {
  Sim sim;
  sim.comm_ms = 6;  // 4 buckets x 6 ms against a 10 ms backward: ~14 ms exposed per step
  ddp::Analysis a = run_analysis(sim, "comm");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, -1) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "allreduce");
  EXPECT_NEAR(a.causes.front().lost_ms_per_step, 16.5, 1.5) << describe(a);
  EXPECT_EQ(a.verdict.rfind("communication bound", 0), 0u) << a.verdict;
  EXPECT_EQ(a.causes.front().victims.size(), 2u);
  for (const auto& r : a.ranks) EXPECT_LT(r.skew_ms, 1.0);
}

TEST(Analysis, AllreduceBandwidthOverlapAndSkewFollowTheirDefinitions) {
  Sim sim;
  sim.jitter = 0;
  sim.comm_ms = 5;
  sim.world = 4;
  sim.rank = std::vector<RankKnobs>(4);
  ddp::Analysis a = run_analysis(sim, "bw");
  ASSERT_EQ(a.ranks.size(), 4u);
  for (const auto& r : a.ranks) {
    // buckets launched at 2.5, 5, 7.5, 10 ms into a 10 ms backward, 5 ms each, serialised: busy 2.5..22.5 ms
    EXPECT_NEAR(r.allreduce.time_ms_per_step, 20.0, 1e-6);
    double alg = 4.0 * (25 << 20) / 20e6;
    EXPECT_NEAR(r.allreduce.algbw_gbps, alg, 1e-6);
    EXPECT_NEAR(r.allreduce.busbw_gbps, alg * 2 * 3 / 4, 1e-6);
    // hidden under backward: 5 + 5 + 2.5 + 0 of 5 + 7.5 + 10 + 12.5
    EXPECT_NEAR(r.overlap_pct, 100.0 * 12.5 / 35.0, 1e-6);
    EXPECT_NEAR(r.skew_ms, 0.0, 1e-9);
  }
  // A slower backward on rank 1 delays its launches by 1.25, 2.5, 3.75, 5 ms: rank 0 sits in allreduce waiting for
  // its peer during [2.5, 3.75] u [5, 7.5] u [7.5, 11.25] u [10, 15] ms of backward: 11.25 ms/step of wall time.
  Sim slow;
  slow.jitter = 0;
  slow.rank[1].backward = 15;
  ddp::Analysis b = run_analysis(slow, "skew");
  EXPECT_NEAR(b.ranks[0].skew_ms, 11.25, 1e-6);
  EXPECT_NEAR(b.ranks[1].skew_ms, 0.0, 1e-9);
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(b.causes.front().rank, 1);
  EXPECT_EQ(b.causes.front().stage, "backward");
  EXPECT_NEAR(b.causes.front().lost_ms_per_step, 5.0, 1e-3) << describe(b);
}

TEST(Analysis, CheckpointAndUntrackedTimeAreCauses) {
  Sim ck;
  ck.rank[0].checkpoint = 30;  // rank 0 saves every 2nd step; rank 1 waits for it in the next allreduce
  ddp::Analysis a = run_analysis(ck, "checkpoint");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 0) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "checkpoint") << describe(a);
  EXPECT_NEAR(a.causes.front().lost_ms_per_step, 15.0, 2.0) << describe(a);

  Sim gap;
  gap.rank[1].untracked = 8;
  ddp::Analysis b = run_analysis(gap, "untracked");
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(b.causes.front().rank, 1) << describe(b);
  EXPECT_EQ(b.causes.front().stage, "other") << describe(b);
  EXPECT_NEAR(b.causes.front().evidence.at("excess_ms_per_step").get<double>(), 8.0, 1.0) << describe(b);
}

TEST(Analysis, DataWaitsWithoutLoaderSpansStayOnWaitData) {
  Sim sim;
  sim.loader_spans = false;
  sim.rank[1].transform += 60;
  ddp::Analysis a = run_analysis(sim, "noloader");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 1) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "wait_data") << describe(a);
  EXPECT_TRUE(has_flag(a, "loader_cannot_keep_up", 1));
}

// Every rank's loader equally slow (a machine short of CPU, a dataset too slow for all): the job's input pipeline is
// the cause on every rank, named once for all ranks, not as rank 0's because it came out a little ahead. One rank
// clearly slower than the others stays that rank's.
TEST(Analysis, InputWaitsEveryRankSharesAreOneCauseOfAllRanks) {
  for (const bool with_loader_spans : {false, true}) {
    Sim sim;
    sim.loader_spans = with_loader_spans;
    sim.rank[0].transform += 60;
    sim.rank[1].transform += 60;
    ddp::Analysis a = run_analysis(sim, with_loader_spans ? "shared_input_spans" : "shared_input");
    ASSERT_FALSE(a.causes.empty());
    const ddp::StallCause& top = a.causes.front();
    EXPECT_EQ(top.rank, -1) << describe(a);
    EXPECT_EQ(top.stage, with_loader_spans ? "transform" : "wait_data") << describe(a);
    EXPECT_NE(top.explanation.find("every rank waits for its own input"), std::string::npos) << top.explanation;
    for (const auto& c : a.causes) EXPECT_FALSE(c.rank >= 0 && c.stage == top.stage) << describe(a);
    EXPECT_EQ(a.verdict.find("rank "), std::string::npos) << a.verdict;
    EXPECT_NE(a.verdict.find("input bound"), std::string::npos) << a.verdict;

    sim.rank[1].transform -= 50;  // rank 0's loader now clearly the slowest: its own cause again
    ddp::Analysis b = run_analysis(sim, with_loader_spans ? "one_input_spans" : "one_input");
    ASSERT_FALSE(b.causes.empty());
    EXPECT_EQ(b.causes.front().rank, 0) << describe(b);
  }
}

TEST(Analysis, ThreeRanksBlameTheOneLateRank) {
  Sim sim;
  sim.world = 3;
  sim.rank = std::vector<RankKnobs>(3);
  sim.rank[2].forward += 10;
  ddp::Analysis a = run_analysis(sim, "three");
  ASSERT_FALSE(a.causes.empty());
  const ddp::StallCause& top = a.causes.front();
  EXPECT_EQ(top.rank, 2) << describe(a);
  EXPECT_EQ(top.stage, "forward");
  std::set<int> victims;
  for (const auto& v : top.victims) victims.insert(v.rank);
  EXPECT_EQ(victims, (std::set<int>{0, 1})) << describe(a);
  EXPECT_NEAR(top.lost_ms_per_step, 10.0, 1.5);
}

TEST(Analysis, ClockOffsetsAreApplied) {
  Sim plain;
  plain.rank[1].backward = 20;
  Sim shifted = plain;
  shifted.rank[1].clock_offset_ns = 3'000'000'000;  // rank 1's clock reads 3 s behind rank 0's
  shifted.rank[0].clock_offset_ns = 0;
  ddp::Analysis a = run_analysis(plain, "clock_a"), b = run_analysis(shifted, "clock_b");
  ASSERT_FALSE(a.causes.empty());
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(b.causes.front().rank, 1);
  EXPECT_EQ(b.causes.front().stage, "backward");
  EXPECT_NEAR(a.causes.front().lost_ms, b.causes.front().lost_ms, 1e-6);
  EXPECT_NEAR(a.ranks[0].skew_ms, b.ranks[0].skew_ms, 1e-6);
  EXPECT_EQ(a.causes.front().at_ns, b.causes.front().at_ns);
}

TEST(Analysis, WorstInstancePointsAtAWaitSpan) {
  Sim sim;
  sim.rank[0].transform += 60;
  ddp::RunTrace run;
  ddp::Analysis a = run_analysis(sim, "at", &run);
  ASSERT_FALSE(a.causes.empty());
  const ddp::StallCause& c = a.causes.front();
  const int64_t origin = run.origin_ns();
  bool found = false;
  for (const auto& r : run.ranks) {
    if (static_cast<int>(r.rank) != c.at_rank) continue;
    for (const auto& e : r.events)
      if (e.is_span() && ddp::is_wait(e.stage_id()) && e.step == c.at_step &&
          e.t0 + r.clock_offset_ns() - origin == c.at_ns)
        found = true;
  }
  EXPECT_TRUE(found) << describe(a);
  EXPECT_GT(c.at_ns, 0);
}

TEST(Analysis, AccumulationCausesAndSyncEveryMicroStepFlag) {
  Sim sim;
  sim.accum = 4;
  sim.rank[1].transform += 30;  // 32.5 ms / 2 workers per batch vs ~6.5 ms of compute per micro-step
  ddp::Analysis a = run_analysis(sim, "accum");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 1) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "transform") << describe(a);
  EXPECT_NEAR(a.ranks[0].micro_steps, 4.0, 1e-9);
  EXPECT_FALSE(has_flag(a, "sync_every_micro_step")) << describe(a);

  Sim every;
  every.accum = 4;
  every.sync_every_step = true;
  ddp::Analysis b = run_analysis(every, "accum_every");
  EXPECT_TRUE(has_flag(b, "sync_every_micro_step", 0)) << describe(b);
  EXPECT_TRUE(has_flag(b, "sync_every_micro_step", 1)) << describe(b);
  EXPECT_NEAR(b.ranks[0].allreduce.syncs_per_step, 4.0, 1e-9);

  // Also found without a manifest (accumulation inferred from the micro-steps).
  every.manifest = false;
  ddp::Analysis c = run_analysis(every, "accum_every_nomanifest");
  EXPECT_TRUE(has_flag(c, "sync_every_micro_step", 0)) << describe(c);
}

TEST(Analysis, PageableH2dFlag) {
  Sim sim;
  sim.pinned = false;
  ddp::Analysis a = run_analysis(sim, "pageable");
  EXPECT_TRUE(has_flag(a, "pageable_h2d", 0));
  EXPECT_TRUE(has_flag(a, "pageable_h2d", 1));

  // No manifest: low H2D bandwidth (4 MiB in 3 ms = 1.4 GB/s) taking a visible share of the step.
  Sim slow;
  slow.manifest = false;
  for (auto& r : slow.rank) r.h2d = 3;
  ddp::Analysis b = run_analysis(slow, "pageable_bw");
  EXPECT_TRUE(has_flag(b, "pageable_h2d", 0)) << describe(b);

  // Fast copies without a manifest stay silent (the balanced run's 8 GB/s).
  Sim fast;
  fast.manifest = false;
  ddp::Analysis c = run_analysis(fast, "pinned_bw");
  EXPECT_FALSE(has_flag(c, "pageable_h2d")) << describe(c);
}

TEST(Analysis, TinyBucketsFlag) {
  Sim sim;
  sim.buckets = 16;
  sim.bucket_bytes = 64 << 10;
  sim.comm_ms = 0.1;
  ddp::Analysis a = run_analysis(sim, "tiny");
  EXPECT_TRUE(has_flag(a, "tiny_buckets", 0)) << describe(a);
  EXPECT_TRUE(has_flag(a, "tiny_buckets", 1));
  // A small model in one bucket is not "tiny buckets".
  Sim one;
  one.buckets = 1;
  one.bucket_bytes = 200 << 10;
  EXPECT_FALSE(has_flag(run_analysis(one, "one_bucket"), "tiny_buckets"));
}

// A quarter of the steps' collectives take 4 ms longer with every rank present (what Gloo's event-loop spin looks
// like): flagged, with the Gloo advice when the manifest says gloo. A peer that is late now and then makes the other
// rank's allreduce spans just as long, but that is waiting, not the collective: no flag. Nor in a balanced run.
TEST(Analysis, CollectiveTailFlag) {
  Sim sim;
  sim.steps = 40;
  sim.buckets = 1;
  sim.comm_tail_ms = 4;
  sim.comm_tail_every = 4;
  sim.backend = "gloo";
  ddp::Analysis a = run_analysis(sim, "comm_tail");
  ASSERT_TRUE(has_flag(a, "collective_tail", -1)) << describe(a);
  for (const auto& f : a.flags)
    if (f.id == "collective_tail") {
      EXPECT_NEAR(f.evidence["median_ms"].get<double>(), 0.3, 0.05);
      EXPECT_NEAR(f.evidence["p90_ms"].get<double>(), 4.3, 0.1);
      EXPECT_NE(f.message.find("SCHED_BATCH"), std::string::npos) << f.message;
      EXPECT_EQ(f.message.find("NCCL"), std::string::npos) << "the manifest says gloo: " << f.message;
    }

  Sim late = sim;
  late.comm_tail_ms = 0;
  late.rank[1].late_ms = 4;
  late.rank[1].late_every = 4;
  ddp::Analysis b = run_analysis(late, "comm_late_peer");
  EXPECT_FALSE(has_flag(b, "collective_tail")) << describe(b);

  Sim balanced;
  balanced.steps = 40;
  EXPECT_FALSE(has_flag(run_analysis(balanced, "comm_balanced"), "collective_tail"));
}

TEST(Analysis, MemoryGrowthFlag) {
  Sim sim;
  sim.rank[1].rss_growth_mb_per_step = 15;  // +285 MiB over 20 steps on 1000 MiB
  ddp::Analysis a = run_analysis(sim, "memgrowth");
  EXPECT_TRUE(has_flag(a, "memory_growth", 1)) << describe(a);
  EXPECT_FALSE(has_flag(a, "memory_growth", 0));
  // A warm-up jump that then stays flat is not growth; nor is a slow creep under the thresholds.
  Sim flat;
  flat.rank[0].rss_warmup_mb = 400;
  flat.rank[1].rss_growth_mb_per_step = 1;
  ddp::Analysis b = run_analysis(flat, "memflat");
  EXPECT_FALSE(has_flag(b, "memory_growth")) << describe(b);
}

TEST(Analysis, IncompleteTraceAndDroppedEventsFlags) {
  Sim sim;
  sim.complete = false;
  ddp::Analysis a = run_analysis(sim, "incomplete");
  EXPECT_TRUE(has_flag(a, "trace_incomplete", 0));
  EXPECT_FALSE(a.ranks[0].complete);
  EXPECT_FALSE(has_flag(a, "events_dropped"));
  Sim dropped;
  dropped.dropped = 17;
  ddp::Analysis b = run_analysis(dropped, "dropped");
  EXPECT_TRUE(has_flag(b, "events_dropped", 1));
  EXPECT_FALSE(has_flag(b, "trace_incomplete"));
}

TEST(Analysis, StepsAreDerivedWhenStepSpansAreMissing) {
  Sim sim;
  sim.step_spans = false;
  sim.rank[0].backward += 10;
  ddp::Analysis a = run_analysis(sim, "nosteps");
  EXPECT_EQ(a.steps, 19u);
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 0);
  EXPECT_EQ(a.causes.front().stage, "backward");
}

TEST(Analysis, SingleRankAndEmptyRunsDoNotBreak) {
  Sim one;
  one.world = 1;
  one.rank = std::vector<RankKnobs>(1);
  ddp::Analysis a = run_analysis(one, "single");
  EXPECT_EQ(a.world, 1);
  EXPECT_EQ(a.steps, 19u);
  EXPECT_NEAR(a.ranks[0].allreduce.busbw_gbps, 0.0, 1e-12);
  EXPECT_NEAR(a.ranks[0].skew_ms, 0.0, 1e-12);

  ddp::RunTrace empty;
  ddp::Analysis b = ddp::analyze(empty);
  EXPECT_EQ(b.steps, 0u);
  EXPECT_EQ(b.verdict, "no complete steps to analyse");
  EXPECT_NO_THROW(ddp::analysis_text(b));
  EXPECT_TRUE(ddp::analysis_json(b)["causes"].empty());
}

TEST(Analysis, JsonSchemaIsStable) {
  Sim sim;
  sim.rank[1].transform += 60;
  sim.pinned = false;
  ddp::Analysis a = run_analysis(sim, "schema");
  nlohmann::json j = ddp::analysis_json(a);
  // Round trip through text, as a tool would read it.
  j = nlohmann::json::parse(j.dump());
  EXPECT_EQ(j.at("schema"), "ddp_profile.analysis/1");
  for (const char* k : {"world_size", "steps", "warmup_steps", "step_ms", "verdict", "causes", "flags", "ranks",
                        "problems"})
    EXPECT_TRUE(j.contains(k)) << k;
  ASSERT_GE(j["causes"].size(), 1u);
  double prev = 1e300;
  for (const auto& c : j["causes"]) {
    for (const char* k : {"rank", "stage", "lost_ms", "lost_ms_per_step", "share", "victims", "evidence",
                          "explanation", "at_ns", "at_rank", "at_step"})
      EXPECT_TRUE(c.contains(k)) << k;
    EXPECT_TRUE(c["evidence"].is_object());
    EXPECT_LE(c["lost_ms"].get<double>(), prev);
    prev = c["lost_ms"].get<double>();
    for (const auto& v : c["victims"]) {
      EXPECT_TRUE(v["rank"].is_number_integer());
      EXPECT_TRUE(v["stage"] == "wait_data" || v["stage"] == "wait_comm");
      EXPECT_TRUE(v["ms"].is_number());
    }
  }
  EXPECT_EQ(j["causes"][0]["rank"], 1);
  EXPECT_EQ(j["causes"][0]["stage"], "transform");
  for (const auto& f : j["flags"]) {
    for (const char* k : {"id", "rank", "message", "evidence"}) EXPECT_TRUE(f.contains(k)) << k;
  }
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& r : j["ranks"]) {
    for (const char* k : {"rank", "steps", "step_ms", "stages_ms_per_step", "wait_data_ms", "wait_comm_ms",
                          "overlap_pct", "allreduce", "skew_ms", "h2d_gbps", "loader", "micro_steps"})
      EXPECT_TRUE(r.contains(k)) << k;
    for (const char* k : {"bytes_per_step", "algbw_gbps", "busbw_gbps", "count_per_step", "time_ms_per_step"})
      EXPECT_TRUE(r["allreduce"].contains(k)) << k;
    EXPECT_TRUE(r["stages_ms_per_step"].contains("forward"));
  }
  std::string text = ddp::analysis_text(a);
  size_t causes = text.find("causes"), flags = text.find("flags:"), ranks = text.find("ranks:");
  ASSERT_NE(causes, std::string::npos);
  EXPECT_LT(causes, flags);
  EXPECT_LT(flags, ranks);
  EXPECT_NE(text.find("rank 1 transform"), std::string::npos) << text;
  EXPECT_NE(text.find("[pageable_h2d]"), std::string::npos) << text;
}
