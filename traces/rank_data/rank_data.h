#pragma once
// One rank's trace prepared for what reads its steps: the stall analysis (traces/analysis/) and the replay
// (traces/replay/). Spans are moved onto the common clock (rank 0's), sorted into the lanes the rules read (main
// thread, loader, allreduce, other), steps are found and the analysed ones chosen (warm-up skipped), and allreduce
// buckets are indexed for matching across ranks.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "traces/model/run_folder.h"
#include "traces/model/span_cpu.h"

namespace ddp::rank_data {

// A rank with at least this many steps has its first one skipped: it holds one-time costs (first batch, allocator,
// autotuning) that are not stalls of the steady state. With fewer steps there would be too little left to analyse.
inline constexpr uint64_t kWarmupMinSteps = 3;

inline double ms(double ns) { return ns / 1e6; }
inline std::string sname(Stage s) { return std::string(stage_name(s)); }

// One span, on the common clock (rank 0's).
struct Span {
  int64_t t0 = 0, t1 = 0;
  uint64_t value = 0;
  uint32_t step = 0;
  uint32_t item = 0;
  uint16_t epoch = 0;
  uint16_t bucket = kNoBucket;
  uint8_t micro = 0;
  Stage stage = Stage::step;
  uint8_t lane = 0;
  int64_t dur() const { return t1 - t0; }
};

struct Interval {
  int64_t t0 = 0, t1 = 0;
};

// A span's CPU split (traces/model/span_cpu.h): on a CPU and waiting for a core, microseconds; cpu_us kNoSplit when
// the span carries none (its recorder read no CPU time for it).
struct SpanSplit {
  static constexpr uint32_t kNoSplit = UINT32_MAX;
  uint32_t cpu_us = kNoSplit;
  uint32_t wait_us = kWaitUnknown;
  bool known() const { return cpu_us != kNoSplit; }
  bool wait_known() const { return known() && wait_us != kWaitUnknown; }
};

struct Sample {
  int64_t t = 0;
  uint64_t v = 0;
};

// A sync is one (step, micro-step) whose gradients are allreduced; a bucket is one allreduce inside it.
inline uint64_t sync_key(uint32_t step, uint8_t micro) { return (static_cast<uint64_t>(step) << 8) | micro; }
inline uint64_t bucket_key(uint32_t step, uint8_t micro, uint16_t bucket) {
  return (static_cast<uint64_t>(step) << 24) | (static_cast<uint64_t>(micro) << 16) | bucket;
}

// The latest launch of every bucket over all ranks and the runner-up (each with its rank), so that "the latest
// launch by any other rank" is one lookup instead of a scan of every rank's launches: at 1024 ranks that scan, once
// per bucket per rank, was 70 % of --analyze. Ties go to the rank listed first, as the scan had them.
struct PeerLaunches {
  struct Top {
    int64_t t1, t2;
    int r1 = -1, r2 = -1;
  };
  std::unordered_map<uint64_t, Top> top;
};

struct RankData {
  const RankTrace* trace = nullptr;
  int rank = 0;
  std::vector<Span> main;       // main-lane spans except `step`, sorted by t0
  std::vector<Span> loader;     // disk_read, transform, collate, pin
  std::vector<Span> starts;     // DataLoader workers starting (worker_start), sorted by t0
  std::vector<Span> allreduce;  // one per bucket per sync, sorted by t0
  std::vector<Span> other;      // anything else: GPU activity, main stages on other lanes
  // The CPU split of each main and loader span, parallel to `main` and `loader`; empty when the trace carries none
  // (a profiler trace, an older run): then what is read of them is wall time alone.
  std::vector<SpanSplit> main_cpu, loader_cpu;
  std::vector<Span> wait_comm;  // the main lane's wait_comm spans, sorted by t0
  std::map<uint32_t, Interval> steps;
  std::array<std::vector<Sample>, kCounterCount> counters;
  std::set<uint8_t> loader_lanes;
  std::vector<uint32_t> analysed;
  std::vector<uint8_t> analysed_mask;  // indexed by step - analysed.front(); empty when the range is huge
  bool in(uint32_t step) const {
    if (analysed_mask.empty()) return std::binary_search(analysed.begin(), analysed.end(), step);
    return step >= analysed.front() && step - analysed.front() < analysed_mask.size() &&
           analysed_mask[step - analysed.front()];
  }
  std::unordered_map<uint64_t, int64_t> launch;  // bucket_key -> allreduce launch (t0)
  std::map<uint64_t, int64_t> sync_done;         // sync_key -> completion of its last bucket (max t1)
  std::vector<Interval> compute;                 // merged forward/backward intervals of the main lane
  std::unordered_map<uint32_t, std::vector<size_t>> main_by_step;
  std::unordered_map<uint32_t, std::vector<size_t>> ar_by_step;
  std::shared_ptr<const PeerLaunches> peers;  // every rank's launches, set by index_peer_launches
};

RankData prepare(const RankTrace& t);
// Steps every rank analysed.
std::vector<uint32_t> common_steps(const std::vector<RankData>& data);
// Where rank `rank` is among `data` (the run's traces, which may be a subset of the ranks), or -1.
int rank_index(const std::vector<RankData>& data, int rank);
// Builds the launches of `all` into one PeerLaunches that every rank's data points to (call once all are prepared).
void index_peer_launches(std::vector<RankData>& all);

// Time of `v` (sorted, disjoint) inside [a, b).
int64_t overlap_with(const std::vector<Interval>& v, int64_t a, int64_t b);
// Length of the union of the intervals.
int64_t union_length(std::vector<Interval> v);
// Latest launch of the same bucket on any other rank, or INT64_MIN when no peer launched it.
int64_t peer_launch(const std::vector<RankData>& all, int self, uint64_t key, int* who = nullptr);

}  // namespace ddp::rank_data
