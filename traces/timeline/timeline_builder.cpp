// TimelineBuilder: collects spans and counter samples from a loader, then sorts them into the model (rows by
// nesting, steps, per-stage totals, colours, time zero at the earliest event).
#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

#include "traces/base/parse_int.h"
#include "traces/timeline/timeline.h"

namespace ddp {

TimelineBuilder::TimelineBuilder() = default;

int TimelineBuilder::process(std::string_view key) {
  auto it = proc_index_.find(std::string(key));
  if (it != proc_index_.end()) return it->second;
  int id = static_cast<int>(procs_.size());
  proc_index_.emplace(std::string(key), id);
  Process p;
  p.key = key;
  p.name = key.empty() ? "process" : "process " + std::string(key);
  int64_t n = 0;
  p.sort = parse_decimal(key, n) ? n : std::numeric_limits<int64_t>::max() / 2 + id;
  procs_.push_back(std::move(p));
  labels_.emplace_back();
  staged_.emplace_back();
  tallies_.emplace_back();
  remap_of_.emplace_back();
  lane_index_.emplace_back();
  counter_index_.emplace_back();
  return id;
}

int TimelineBuilder::lane(int p, std::string_view key) {
  auto& idx = lane_index_[p];
  auto it = idx.find(std::string(key));
  if (it != idx.end()) return it->second;
  int id = static_cast<int>(procs_[p].lanes.size());
  idx.emplace(std::string(key), id);
  Lane l;
  l.key = key;
  l.name = key.empty() ? "lane" : "thread " + std::string(key);
  int64_t n = 0;
  l.sort = parse_decimal(key, n) ? n : std::numeric_limits<int64_t>::max() / 2 + id;
  procs_[p].lanes.push_back(std::move(l));
  staged_[p].emplace_back();
  remap_of_[p].push_back(kNoRemap);
  return id;
}

uint32_t TimelineBuilder::add_detail(uint64_t bytes, uint16_t bucket, uint32_t text_id, uint16_t epoch, uint8_t micro) {
  if (bytes == 0 && bucket == kNoBucket && epoch == 0 && micro == 0) return text_id;  // most spans: a text at most
  tl_.details.push_back(SpanDetail{bytes, text_id, bucket, epoch, micro});
  return Timeline::kDetailBit | static_cast<uint32_t>(tl_.details.size() - 1);
}

void TimelineBuilder::add_counter(int p, std::string_view name, int64_t t, double v) {
  auto& idx = counter_index_[p];
  auto it = idx.find(std::string(name));
  int id;
  if (it == idx.end()) {
    id = static_cast<int>(procs_[p].counters.size());
    idx.emplace(std::string(name), id);
    CounterSeries c;
    c.name = name;
    c.bytes = (name.size() > 6 && name.substr(name.size() - 6) == "_bytes") || name.rfind("Total ", 0) == 0;
    procs_[p].counters.push_back(std::move(c));
  } else {
    id = it->second;
  }
  CounterSeries& c = procs_[p].counters[id];
  c.t.push_back(t);
  c.v.push_back(v);
}

// ---- finish: staged spans and samples -> the sorted model ----
namespace {

struct TimeRange {
  int64_t lo = 0, hi = 0;
};

// A lane whose spans came out of order: gathered (freeing chunks as they are copied), sorted, then split into rows
// by nesting depth; the lane is briefly in memory twice.
void rows_from_unordered(Lane& lane, LaneStaging& staged) {
  std::vector<Span> spans;
  spans.reserve(staged.size());
  for (StagedSpans& r : staged.rows()) r.consume([&](const Span& s) { spans.push_back(s); });
  staged.rest().consume([&](const Span& s) { spans.push_back(s); });
  std::sort(spans.begin(), spans.end(), starts_before);
  std::vector<uint8_t> depth_of(spans.size());
  std::vector<size_t> row_sizes;
  NestingDepth depth;
  for (size_t i = 0; i < spans.size(); ++i) {
    depth_of[i] = static_cast<uint8_t>(depth.next(spans[i].t0, spans[i].t1()));
    if (row_sizes.size() <= depth_of[i]) row_sizes.resize(depth_of[i] + 1, 0);
    ++row_sizes[depth_of[i]];
  }
  lane.rows.resize(row_sizes.size());
  for (size_t d = 0; d < row_sizes.size(); ++d) lane.rows[d].spans = SpanArray::with_capacity(row_sizes[d]);
  for (size_t i = 0; i < spans.size(); ++i) {
    Row& row = lane.rows[depth_of[i]];
    row.spans.push_back(spans[i]);
    row.max_dur = std::max(row.max_dur, spans[i].duration());
  }
}

// Sorts a counter's samples by time (they usually arrive in order), moves them to time zero and finds the range.
void finish_counter(CounterSeries& c, int64_t shift) {
  if (!std::is_sorted(c.t.begin(), c.t.end())) {
    std::vector<size_t> idx(c.t.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return c.t[a] < c.t[b]; });
    std::vector<int64_t> t(idx.size());
    std::vector<double> v(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) {
      t[i] = c.t[idx[i]];
      v[i] = c.v[idx[i]];
    }
    c.t.swap(t);
    c.v.swap(v);
  }
  for (int64_t& t : c.t) t -= shift;
  if (!c.v.empty()) {
    auto [mn, mx] = std::minmax_element(c.v.begin(), c.v.end());
    c.vmin = *mn;
    c.vmax = *mx;
  }
}

// Stage names take their stage's colour; every other name a colour hashed from its text.
void assign_name_colors(Timeline& tl) {
  tl.name_colors.resize(tl.names.size());
  for (uint32_t i = 0; i < tl.names.size(); ++i)
    tl.name_colors[i] =
        i < static_cast<uint32_t>(kStageCount) ? stage_color(static_cast<Stage>(i)) : name_color(tl.names.at(i));
}

// The earliest and latest time over the staged spans (`lo` > `hi` when none) and every counter sample; {0, 0} when
// there is nothing.
TimeRange time_range(int64_t lo, int64_t hi, const std::vector<Process>& procs) {
  for (const Process& p : procs)
    for (const auto& c : p.counters)
      for (int64_t t : c.t) {
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
  if (lo > hi) return {};
  return {lo, hi};
}

// One lane's staged spans -> its rows, each span through `visit` first (moved to time zero, and remapped when it
// came from an absorbed builder). A lane whose spans came in display order has its rows already: one pass over them,
// then their chunks moved into place.
template <class Visit>
void finish_lane(Process& proc, Lane& lane, LaneStaging& spans, Visit&& visit) {
  lane.span_count = spans.size();
  proc.span_count += spans.size();
  if constexpr (!std::is_same_v<std::decay_t<Visit>, std::nullptr_t>) spans.for_each(visit);
  if (!spans.ordered()) {
    rows_from_unordered(lane, spans);
    return;
  }
  lane.rows.resize(spans.rows().size());
  for (size_t d = 0; d < lane.rows.size(); ++d) {
    lane.rows[d].max_dur = spans.row_max_dur(d);
    lane.rows[d].spans = SpanArray::from_staged(spans.rows()[d]);
  }
}

}  // namespace

// Processes are independent: finished on a thread each up to the cores (per-rank traces: a rank per core).
void TimelineBuilder::finish_processes(int64_t shift) {
  std::atomic<size_t> next{0};
  std::exception_ptr failed;
  std::mutex failed_mutex;
  auto work = [&] {
    try {
      for (size_t p = next++; p < procs_.size(); p = next++) finish_process(p, shift);
    } catch (...) {  // bad_alloc, most likely: the first one is rethrown once every thread is done
      std::lock_guard<std::mutex> lock(failed_mutex);
      if (!failed) failed = std::current_exception();
    }
  };
  const size_t threads = std::min<size_t>(procs_.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
  for (const Process& proc : procs_) {
    tl_.span_count += proc.span_count;
    for (const CounterSeries& c : proc.counters) tl_.counter_samples += c.t.size();
  }
}

void TimelineBuilder::finish_process(size_t p, int64_t shift) {
  Process& proc = procs_[p];
  if (!labels_[p].empty()) proc.name += " [" + labels_[p] + "]";
  for (size_t l = 0; l < proc.lanes.size(); ++l) {
    const int r = remap_of_[p][l];
    if (r != kNoRemap) {
      const SpanRemap& remap = remaps_[r];
      finish_lane(proc, proc.lanes[l], staged_[p][l], [&remap, shift](Span& s) {
        remap(s);
        s.t0 -= shift;
      });
    } else if (shift != 0) {
      finish_lane(proc, proc.lanes[l], staged_[p][l], [shift](Span& s) { s.t0 -= shift; });
    } else {
      finish_lane(proc, proc.lanes[l], staged_[p][l], nullptr);  // at time zero already: no pass
    }
  }
  ProcessTally& tally = tallies_[p];
  tally.shift(-shift);
  proc.stages = tally.stages();
  proc.steps = tally.take_steps();
  std::stable_sort(proc.lanes.begin(), proc.lanes.end(), [](const Lane& a, const Lane& b) { return a.sort < b.sort; });
  for (CounterSeries& c : proc.counters) finish_counter(c, shift);
}

void TimelineBuilder::scope_processes(const std::string& key_prefix, const std::string& name_prefix, int rank,
                                      int64_t sort_base, int64_t sort_range) {
  proc_index_.clear();
  for (size_t p = 0; p < procs_.size(); ++p) {
    Process& proc = procs_[p];
    proc.key = key_prefix + proc.key;
    proc.name = name_prefix + proc.name;
    proc.rank = rank;
    proc.sort = sort_base + std::clamp<int64_t>(proc.sort, 0, sort_range - 1);
    proc_index_.emplace(proc.key, static_cast<int>(p));
  }
  for (std::string& line : tl_.problems) line = name_prefix + line;
}

void TimelineBuilder::absorb(TimelineBuilder&& other, int64_t shift_ns) { absorb_all({{&other, shift_ns}}); }

void TimelineBuilder::apply_remap(size_t p, size_t l) {
  int& r = remap_of_[p][l];
  if (r == kNoRemap) return;
  staged_[p][l].for_each(remaps_[r]);  // its order state was moved when it was absorbed
  r = kNoRemap;
}

void TimelineBuilder::apply_remaps() {
  for (size_t p = 0; p < staged_.size(); ++p)
    for (size_t l = 0; l < staged_[p].size(); ++l) apply_remap(p, l);
  remaps_.clear();
}

void TimelineBuilder::absorb_all(const std::vector<std::pair<TimelineBuilder*, int64_t>>& others) {
  // The tables, one builder after the other (ids depend on the order); each builder's lanes then move here as they
  // are, their spans remapped at finish in the pass that moves them to time zero (a pass over every span is the
  // bulk of the work: one instead of two). A lane that joins spans already here is remapped now.
  for (size_t i = 0; i < others.size(); ++i) {
    TimelineBuilder& other = *others[i].first;
    other.apply_remaps();  // what it absorbed itself
    const int64_t shift = others[i].second;
    const int remap = static_cast<int>(remaps_.size());
    SpanRemap& r = remaps_.emplace_back();
    r.shift = shift;
    r.text_offset = tl_.extras.append(std::move(other.tl_.extras));
    r.detail_offset = static_cast<uint32_t>(tl_.details.size());
    for (SpanDetail d : other.tl_.details) {
      if (d.text) d.text += r.text_offset;
      tl_.details.push_back(d);
    }
    r.cpu_offset = static_cast<uint32_t>(tl_.cpu.size());
    for (SpanCpuSplit c : other.tl_.cpu) {
      c.detail = r.detail(c.detail);  // a details index or a text: never another split
      tl_.cpu.push_back(c);
    }
    r.name_of.resize(other.tl_.names.size());
    for (uint32_t n = 0; n < r.name_of.size(); ++n) r.name_of[n] = tl_.names.intern(other.tl_.names.at(n));
    if (other.span_lo_ <= other.span_hi_) {
      span_lo_ = std::min(span_lo_, other.span_lo_ + shift);
      span_hi_ = std::max(span_hi_, other.span_hi_ + shift);
    }
    for (size_t p = 0; p < other.procs_.size(); ++p) {
      const int mine = process(other.procs_[p].key);
      Process& into = procs_[mine];
      Process& from = other.procs_[p];
      into.name = std::move(from.name);
      into.rank = from.rank;
      into.sort = from.sort;
      labels_[mine] = std::move(other.labels_[p]);
      other.tallies_[p].shift(shift);
      tallies_[mine].join(std::move(other.tallies_[p]));
      for (CounterSeries& c : from.counters) {
        for (int64_t& t : c.t) t += shift;
        into.counters.push_back(std::move(c));
      }
      for (size_t l = 0; l < from.lanes.size(); ++l) {
        const int lane_id = lane(mine, from.lanes[l].key);
        into.lanes[lane_id].name = std::move(from.lanes[l].name);
        into.lanes[lane_id].sort = from.lanes[l].sort;
        LaneStaging& here = staged_[mine][lane_id];
        LaneStaging& coming = other.staged_[p][l];
        coming.shifted(shift);  // its order state now, its spans at finish (or just below)
        if (here.size() == 0) {
          here = std::move(coming);
          remap_of_[mine][lane_id] = remap;
        } else {  // one rank's profiling cycles, one file each: joined now, in one clock and one set of ids
          apply_remap(mine, lane_id);
          coming.for_each(r);
          here.append(std::move(coming));
        }
      }
    }
    for (std::string& line : other.tl_.problems) tl_.problems.push_back(std::move(line));
    other = TimelineBuilder{};
  }
}

Timeline TimelineBuilder::finish() {
  const TimeRange range = time_range(span_lo_, span_hi_, procs_);
  const int64_t shift = range.lo;  // time zero at the earliest event
  tl_.origin_ns += shift;
  tl_.t_begin = 0;
  tl_.t_end = range.hi - range.lo;
  finish_processes(shift);
  std::stable_sort(procs_.begin(), procs_.end(), [](const Process& a, const Process& b) { return a.sort < b.sort; });
  tl_.processes = std::move(procs_);
  tl_.extras.seal();
  tl_.details.shrink_to_fit();
  tl_.cpu.shrink_to_fit();
  assign_name_colors(tl_);
  procs_.clear();
  staged_.clear();
  tallies_.clear();
  remaps_.clear();
  remap_of_.clear();
  labels_.clear();
  proc_index_.clear();
  lane_index_.clear();
  counter_index_.clear();
  return std::move(tl_);
}

}  // namespace ddp
