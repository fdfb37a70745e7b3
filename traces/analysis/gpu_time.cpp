// gpu_time(): interval unions over a rank's GPU activity records, and the gaps on each stream classified by when the
// next record was launched.
#include "traces/analysis/gpu_time.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "traces/analysis/analysis_thresholds.h"

namespace ddp {
namespace {

struct Interval {
  int64_t t0 = 0, t1 = 0;
  bool operator<(const Interval& o) const { return t0 < o.t0 || (t0 == o.t0 && t1 < o.t1); }
};

// Total length of the union of `v` (sorted here).
int64_t union_ns(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  int64_t total = 0, a = 0, b = 0;
  bool open = false;
  for (const Interval& i : v) {
    if (open && i.t0 <= b) {
      b = std::max(b, i.t1);
      continue;
    }
    if (open) total += b - a;
    a = i.t0, b = i.t1, open = true;
  }
  if (open) total += b - a;
  return total;
}

enum class Work { compute, communication, memory };

bool gpu_work(Stage s, Work& w) {
  switch (s) {
    case Stage::kernel:
      w = Work::compute;
      return true;
    case Stage::nccl:
      w = Work::communication;
      return true;
    case Stage::memcpy_h2d:
    case Stage::memcpy_d2h:
    case Stage::memcpy_d2d:
    case Stage::memset:
      w = Work::memory;
      return true;
    default:
      return false;
  }
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// Each stream's records in start order; a gap before a record is host wait when the call that launched it started
// only after the previous record ended (the stream had nothing queued), else kernel wait when short, else other.
GpuIdleSplit stream_gaps(const std::map<uint8_t, std::vector<const Event*>>& by_stream,
                         const std::unordered_map<uint32_t, int64_t>& launch_at) {
  GpuIdleSplit split;
  for (const auto& [lane, recs] : by_stream) {
    int64_t end = recs.front()->t1;
    for (size_t i = 1; i < recs.size(); ++i) {
      const Event& e = *recs[i];
      const int64_t gap = e.t0 - end;
      if (gap > 0) {
        auto it = e.correlation_id() ? launch_at.find(e.correlation_id()) : launch_at.end();
        if (it == launch_at.end()) {
          ++split.unmatched;
          split.other_ms += ms(gap);
        } else if (it->second >= end) {
          split.host_wait_ms += ms(gap);
        } else if (gap <= kKernelWaitMaxGapNs) {
          split.kernel_wait_ms += ms(gap);
        } else {
          split.other_ms += ms(gap);
        }
      }
      end = std::max(end, e.t1);
    }
  }
  return split;
}

GpuTime rank_gpu_time(const RankTrace& r) {
  GpuTime g;
  g.rank = static_cast<int>(r.rank);
  std::vector<Interval> all, compute, comm, memory;
  std::map<uint8_t, std::vector<const Event*>> by_stream;
  std::unordered_map<uint32_t, int64_t> launch_at;  // correlation -> start of the host call that launched it
  for (const Event& e : r.events) {
    if (!e.is_span()) continue;
    const Stage s = e.stage_id();
    if (s == Stage::cuda_api && e.correlation_id()) launch_at.emplace(e.correlation_id(), e.t0);
    Work w;
    if (!gpu_work(s, w) || e.t1 < e.t0) continue;
    const Interval i{e.t0, e.t1};
    all.push_back(i);
    (w == Work::compute ? compute : w == Work::communication ? comm : memory).push_back(i);
    by_stream[e.lane].push_back(&e);
  }
  g.records = all.size();
  if (all.empty()) return g;
  for (auto& [lane, recs] : by_stream)
    std::stable_sort(recs.begin(), recs.end(), [](const Event* a, const Event* b) { return a->t0 < b->t0; });
  g.streams = by_stream.size();
  int64_t lo = all.front().t0, hi = all.front().t1;
  for (const Interval& i : all) lo = std::min(lo, i.t0), hi = std::max(hi, i.t1);
  const int64_t busy = union_ns(all), c = union_ns(compute), n = union_ns(comm);
  std::vector<Interval> both = compute;
  both.insert(both.end(), comm.begin(), comm.end());
  const int64_t overlap = c + n - union_ns(std::move(both));
  g.window_ms = ms(hi - lo);
  g.busy_ms = ms(busy);
  g.compute_ms = ms(c);
  g.communication_ms = ms(n);
  g.memory_ms = ms(union_ns(memory));
  g.overlap_ms = ms(overlap);
  g.comm_compute_overlap = n > 0 ? static_cast<double>(overlap) / static_cast<double>(n) : -1;
  g.idle_ms = ms(hi - lo - busy);
  g.stream_gaps = stream_gaps(by_stream, launch_at);
  return g;
}

}  // namespace

std::vector<GpuTime> gpu_time(const RunTrace& run) {
  std::vector<GpuTime> out;
  for (const RankTrace& r : run.ranks) {
    GpuTime g = rank_gpu_time(r);
    if (g.records) out.push_back(g);
  }
  std::sort(out.begin(), out.end(), [](const GpuTime& a, const GpuTime& b) { return a.rank < b.rank; });
  return out;
}

nlohmann::json gpu_time_json(const GpuTime& g) {
  return {{"rank", g.rank},
          {"streams", g.streams},
          {"records", g.records},
          {"window_ms", g.window_ms},
          {"busy_ms", g.busy_ms},
          {"compute_ms", g.compute_ms},
          {"communication_ms", g.communication_ms},
          {"memory_ms", g.memory_ms},
          {"comm_compute_overlap_ms", g.overlap_ms},
          {"comm_compute_overlap",
           g.comm_compute_overlap < 0 ? nlohmann::json(nullptr) : nlohmann::json(g.comm_compute_overlap)},
          {"idle_ms", g.idle_ms},
          {"stream_gaps_ms",
           {{"host_wait", g.stream_gaps.host_wait_ms},
            {"kernel_wait", g.stream_gaps.kernel_wait_ms},
            {"other", g.stream_gaps.other_ms},
            {"without_launch_call", g.stream_gaps.unmatched}}}};
}

}  // namespace ddp
