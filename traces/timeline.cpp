#include "traces/timeline.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "traces/chrome_reader.h"
#include "traces/cuda_names.h"

namespace ddp {

// ---------------------------------------------------------------------------------------------------------------
StringTable::StringTable() {
  for (int i = 0; i < kStageCount; ++i) intern(stage_name(static_cast<Stage>(i)));
}

uint32_t StringTable::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  strings_.emplace_back(s);
  auto id = static_cast<uint32_t>(strings_.size() - 1);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::optional<uint32_t> StringTable::find(std::string_view s) const {
  auto it = index_.find(s);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool Timeline::step_range(uint32_t step, int64_t& t0, int64_t& t1) const {
  bool found = false;
  for (const Process& p : processes) {
    auto it = std::lower_bound(p.steps.begin(), p.steps.end(), step,
                               [](const StepMark& m, uint32_t s) { return m.step < s; });
    // steps are sorted by t0, which for one process is also step order; fall back to a scan if not
    if (it == p.steps.end() || it->step != step)
      it = std::find_if(p.steps.begin(), p.steps.end(), [&](const StepMark& m) { return m.step == step; });
    if (it == p.steps.end()) continue;
    t0 = found ? std::min(t0, it->t0) : it->t0;
    t1 = found ? std::max(t1, it->t1) : it->t1;
    found = true;
  }
  return found;
}

// ---------------------------------------------------------------------------------------------------------------
uint32_t name_color(std::string_view name) {
  uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  // hue from the hash, moderate saturation/value so text stays readable on top
  double hue = (h % 360u) / 60.0;
  double s = 0.45 + ((h >> 12) % 20) / 100.0, v = 0.70 + ((h >> 20) % 20) / 100.0;
  double c = v * s, x = c * (1 - std::fabs(std::fmod(hue, 2.0) - 1)), m = v - c;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(hue)) {
    case 0: r = c, g = x; break;
    case 1: r = x, g = c; break;
    case 2: g = c, b = x; break;
    case 3: g = x, b = c; break;
    case 4: r = x, b = c; break;
    default: r = c, b = x; break;
  }
  auto to8 = [m](double f) { return static_cast<uint32_t>(std::lround((f + m) * 255.0)) & 0xFF; };
  return 0xFF000000u | (to8(b) << 16) | (to8(g) << 8) | to8(r);
}

namespace {
bool contains_ci(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && std::tolower(static_cast<unsigned char>(hay[i + k])) == needle[k]) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

bool parse_int(std::string_view s, int64_t& v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
}  // namespace

uint8_t stage_for_chrome_event(std::string_view name, std::string_view cat) {
  if (auto s = stage_from_name(name)) return static_cast<uint8_t>(*s);
  if (name.rfind("ProfilerStep#", 0) == 0) return static_cast<uint8_t>(Stage::step);
  if (cat == "kernel") return static_cast<uint8_t>(contains_ci(name, "nccl") ? Stage::nccl : Stage::kernel);
  if (cat == "gpu_memcpy") {
    if (contains_ci(name, "htod")) return static_cast<uint8_t>(Stage::memcpy_h2d);
    if (contains_ci(name, "dtoh")) return static_cast<uint8_t>(Stage::memcpy_d2h);
    return kNoStage;
  }
  if (cat == "gpu_memset") return static_cast<uint8_t>(Stage::memset);
  return kNoStage;
}

// ---------------------------------------------------------------------------------------------------------------
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
  p.sort = parse_int(key, n) ? n : std::numeric_limits<int64_t>::max() / 2 + id;
  procs_.push_back(std::move(p));
  labels_.emplace_back();
  staged_.emplace_back();
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
  l.sort = parse_int(key, n) ? n : std::numeric_limits<int64_t>::max() / 2 + id;
  procs_[p].lanes.push_back(std::move(l));
  staged_[p].emplace_back();
  return id;
}

uint32_t TimelineBuilder::add_extra(std::string text) {
  tl_.extras.push_back(std::move(text));
  return static_cast<uint32_t>(tl_.extras.size());
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

Timeline TimelineBuilder::finish() {
  Timeline& tl = tl_;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (size_t p = 0; p < procs_.size(); ++p) {
    for (auto& lane_spans : staged_[p])
      for (const Span& s : lane_spans) {
        lo = std::min(lo, s.t0);
        hi = std::max(hi, s.t1);
      }
    for (const auto& c : procs_[p].counters)
      for (int64_t t : c.t) {
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
  }
  if (lo > hi) lo = hi = 0;
  const int64_t shift = lo;  // time zero at the earliest event
  tl.origin_ns += shift;
  tl.t_begin = 0;
  tl.t_end = hi - lo;

  for (size_t p = 0; p < procs_.size(); ++p) {
    Process& proc = procs_[p];
    if (!labels_[p].empty()) proc.name += " [" + labels_[p] + "]";
    // Steps come from step spans; a trace without them gets steps from the spans' step args.
    bool has_step_spans = false;
    for (const auto& lane_spans : staged_[p]) {
      for (const Span& s : lane_spans)
        if (s.stage == static_cast<uint8_t>(Stage::step) && s.step != kNoStep) {
          has_step_spans = true;
          break;
        }
      if (has_step_spans) break;
    }
    std::vector<StepMark> derived_steps;  // indexed by step
    constexpr uint32_t kMaxDerivedStep = 1u << 22;
    for (size_t l = 0; l < proc.lanes.size(); ++l) {
      std::vector<Span>& spans = staged_[p][l];
      for (Span& s : spans) {
        s.t0 -= shift;
        s.t1 -= shift;
        if (s.t1 < s.t0) s.t1 = s.t0;
      }
      auto order = [](const Span& a, const Span& b) { return a.t0 < b.t0 || (a.t0 == b.t0 && a.t1 > b.t1); };
      if (!std::is_sorted(spans.begin(), spans.end(), order)) std::sort(spans.begin(), spans.end(), order);
      Lane& lane = proc.lanes[l];
      lane.span_count = spans.size();
      proc.span_count += spans.size();
      // nesting: a stack of open ends; a span's row is the number of spans still open at its start
      std::vector<int64_t> open;
      constexpr size_t kMaxRows = 64;
      std::vector<size_t> row_sizes;
      std::vector<uint8_t> depth_of(spans.size());
      for (size_t i = 0; i < spans.size(); ++i) {
        const Span& s = spans[i];
        while (!open.empty() && open.back() <= s.t0) open.pop_back();
        size_t d = std::min(open.size(), kMaxRows - 1);
        depth_of[i] = static_cast<uint8_t>(d);
        if (row_sizes.size() <= d) row_sizes.resize(d + 1, 0);
        ++row_sizes[d];
        open.push_back(s.t1);
      }
      lane.rows.resize(row_sizes.size());
      const bool one_row = row_sizes.size() == 1;  // the common case for GPU streams: no copy
      if (!one_row)
        for (size_t d = 0; d < row_sizes.size(); ++d) lane.rows[d].spans.reserve(row_sizes[d]);
      for (size_t i = 0; i < spans.size(); ++i) {
        const Span& s = spans[i];
        Row& row = lane.rows[depth_of[i]];
        if (!one_row) row.spans.push_back(s);
        row.max_dur = std::max(row.max_dur, s.t1 - s.t0);
        if (s.has_stage()) {
          StageStat& st = proc.stages[s.stage];
          ++st.count;
          st.total_ns += s.t1 - s.t0;
          if (s.stage == static_cast<uint8_t>(Stage::step) && s.step != kNoStep)
            proc.steps.push_back({s.t0, s.t1, s.step});
        }
        if (!has_step_spans && s.step < kMaxDerivedStep) {
          if (derived_steps.size() <= s.step) derived_steps.resize(s.step + 1, StepMark{0, -1, 0});
          StepMark& m = derived_steps[s.step];
          if (m.t1 < m.t0) {
            m = StepMark{s.t0, s.t1, s.step};
          } else {
            m.t0 = std::min(m.t0, s.t0);
            m.t1 = std::max(m.t1, s.t1);
          }
        }
      }
      if (one_row)
        lane.rows[0].spans = std::move(spans);
      else
        std::vector<Span>().swap(spans);
    }
    if (!has_step_spans)
      for (const StepMark& m : derived_steps)
        if (m.t1 >= m.t0) proc.steps.push_back(m);
    std::sort(proc.steps.begin(), proc.steps.end(),
              [](const StepMark& a, const StepMark& b) { return a.t0 < b.t0 || (a.t0 == b.t0 && a.step < b.step); });
    std::stable_sort(proc.lanes.begin(), proc.lanes.end(),
                     [](const Lane& a, const Lane& b) { return a.sort < b.sort; });
    for (CounterSeries& c : proc.counters) {
      // samples usually arrive in time order; sort pairs only when not
      bool sorted = std::is_sorted(c.t.begin(), c.t.end());
      if (!sorted) {
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
      tl.counter_samples += c.t.size();
    }
    tl.span_count += proc.span_count;
  }
  std::stable_sort(procs_.begin(), procs_.end(), [](const Process& a, const Process& b) { return a.sort < b.sort; });
  tl.processes = std::move(procs_);
  tl.name_colors.resize(tl.names.size());
  for (uint32_t i = 0; i < tl.names.size(); ++i)
    tl.name_colors[i] = i < static_cast<uint32_t>(kStageCount) ? stage_color(static_cast<Stage>(i))
                                                                : name_color(tl.names.at(i));
  procs_.clear();
  staged_.clear();
  labels_.clear();
  proc_index_.clear();
  lane_index_.clear();
  counter_index_.clear();
  return std::move(tl_);
}

// ---------------------------------------------------------------------------------------------------------------
namespace {
// Span::name of a rank's events: the stage, or for CUDA events the kernel/API name the profiler interned (the Chrome
// export names them the same way). Each CUDA name is interned into the timeline once, on first use.
class SpanNames {
 public:
  SpanNames(TimelineBuilder& b, const RankTrace& r) : b_(b), cuda_(cuda_event_names(r)), ids_(cuda_.size(), kUnset) {}

  uint32_t of(const Event& e) {
    if (e.stage >= kStageCount) return b_.intern("stage " + std::to_string(e.stage));
    if (!e.is_cuda()) return e.stage;
    const uint16_t id = e.name_id();
    if (id >= cuda_.size() || cuda_[id].empty()) return e.stage;
    if (ids_[id] == kUnset) ids_[id] = b_.intern(cuda_[id]);
    return ids_[id];
  }

 private:
  static constexpr uint32_t kUnset = 0xFFFFFFFF;
  TimelineBuilder& b_;
  std::vector<std::string> cuda_;  // by name id
  std::vector<uint32_t> ids_;      // name id -> Timeline::names id
};
}  // namespace

Timeline timeline_from_run(const RunTrace& run) {
  TimelineBuilder b;
  Timeline& tl = b.timeline();
  tl.producer = "ddp_profile";
  tl.run_dir = run.dir;
  tl.source = run.dir;
  tl.problems = run.problems;
  const int64_t origin = run.origin_ns();
  tl.origin_ns = origin;
  for (const RankTrace& r : run.ranks) {
    int p = b.process(std::to_string(r.rank));
    std::string host = r.meta.count("host") ? r.meta.at("host") : std::string();
    std::string pname = "rank " + std::to_string(r.rank) + (host.empty() ? "" : " (" + host + ")");
    if (!r.complete) pname += " [ended early]";
    b.set_process_name(p, pname);
    b.set_process_rank(p, static_cast<int>(r.rank));
    for (size_t lane = 0; lane < r.lanes.size(); ++lane) {
      int l = b.lane(p, std::to_string(lane));
      b.set_lane_name(p, l, r.lanes[lane]);
    }
    const int64_t shift = r.clock_offset_ns() - origin;
    SpanNames names(b, r);
    // lanes are dense small ids: map them once, and size each lane's storage up front
    std::array<int, 256> lane_of;
    lane_of.fill(-1);
    std::array<size_t, 256> per_lane{};
    for (const Event& e : r.events)
      if (e.is_span()) ++per_lane[e.lane];
    for (size_t lane = 0; lane < per_lane.size(); ++lane)
      if (per_lane[lane]) {
        int l = b.lane(p, std::to_string(lane));
        if (lane >= r.lanes.size()) b.set_lane_name(p, l, r.lane_name(static_cast<uint8_t>(lane)));
        lane_of[lane] = l;
        b.reserve_spans(p, l, per_lane[lane]);
      }
    for (const Event& e : r.events) {
      if (e.is_span()) {
        int& l = lane_of[e.lane];
        if (l < 0) {
          l = b.lane(p, std::to_string(e.lane));
          b.set_lane_name(p, l, r.lane_name(e.lane));
        }
        Span s;
        s.t0 = e.t0 + shift;
        s.t1 = e.t1 + shift;
        s.bytes = e.value;
        s.step = e.step;
        s.epoch = e.epoch;
        s.bucket = e.is_cuda() ? kNoBucket : e.bucket_index();
        s.micro = e.micro;
        s.stage = e.stage < kStageCount ? e.stage : kNoStage;
        s.name = names.of(e);
        b.add_span(p, l, s);
      } else {
        b.add_counter(p, counter_name(e.counter_id()), e.t0 + shift, static_cast<double>(e.value));
      }
    }
  }
  return b.finish();  // the earliest event is at 0 already, so origin_ns stays the run's origin
}

namespace {

bool arg_uint(const ChromeValue& v, uint64_t& out) {
  if (v.type != ChromeValue::number || !(v.num >= 0) || v.num > 1.8e19) return false;
  out = static_cast<uint64_t>(v.num);
  return true;
}

class ChromeToTimeline {
 public:
  explicit ChromeToTimeline(TimelineBuilder& b) : b_(b) {}

  bool operator()(const ChromeEventView& e) {
    switch (e.ph) {
      case 'X': span(e, e.ts_ns, e.has_dur ? e.ts_ns + std::max<int64_t>(e.dur_ns, 0) : e.ts_ns); break;
      case 'B': {
        if (!e.has_ts) break;
        auto [p, l] = where(e);
        Open o;
        o.p = p;
        o.l = l;
        o.span = make_span(e, e.ts_ns, e.ts_ns);
        open_[key(p, l)].push_back(o);
        break;
      }
      case 'E': {
        if (!e.has_ts) break;
        auto [p, l] = where(e);
        auto it = open_.find(key(p, l));
        if (it == open_.end() || it->second.empty()) {
          ++unmatched_end_;
          break;
        }
        Span s = it->second.back().span;
        it->second.pop_back();
        s.t1 = std::max(e.ts_ns, s.t0);
        b_.add_span(p, l, s);
        break;
      }
      case 'C': {
        if (!e.has_ts) break;
        int p = proc(e);
        for (size_t i = 0; i < e.arg_count; ++i) {
          const ChromeArg& a = e.args[i];
          if (a.value.type != ChromeValue::number) continue;
          std::string name(e.name);
          if (!(a.key == "value" || (e.arg_count == 1 && !e.name.empty()))) name += "." + std::string(a.key);
          b_.add_counter(p, name, e.ts_ns, a.value.num);
        }
        break;
      }
      case 'i':
      case 'I':
        if (e.name == "[memory]" && e.has_ts) {  // Kineto's allocator samples
          int p = proc(e);
          for (const char* k : {"Total Allocated", "Total Reserved"})
            if (const ChromeValue* v = e.arg(k); v && v->is_number()) b_.add_counter(p, k, e.ts_ns, v->num);
        }
        break;
      case 'M': metadata(e); break;
      default: ++ignored_; break;
    }
    return true;
  }

  void close(int64_t end_ns) {
    uint64_t unclosed = 0;
    for (auto& kv : open_)
      for (Open& o : kv.second) {
        o.span.t1 = std::max(end_ns, o.span.t0);
        b_.add_span(o.p, o.l, o.span);
        ++unclosed;
      }
    if (unclosed) b_.problem(std::to_string(unclosed) + " \"B\" events without an \"E\" (closed at the trace's end)");
    if (unmatched_end_) b_.problem(std::to_string(unmatched_end_) + " \"E\" events without a \"B\" (ignored)");
  }
  int64_t last_ts() const { return last_ts_; }

 private:
  struct Open {
    int p = 0, l = 0;
    Span span;
  };
  static uint64_t key(int p, int l) { return (static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(l); }

  int proc(const ChromeEventView& e) {
    std::string_view pid = e.pid.key();
    if (last_proc_ >= 0 && pid == last_pid_) return last_proc_;
    last_pid_.assign(pid);
    last_proc_ = b_.process(pid);
    last_lane_ = -1;
    return last_proc_;
  }
  std::pair<int, int> where(const ChromeEventView& e) {
    int p = proc(e);
    std::string_view tid = e.tid.key();
    if (last_lane_ < 0 || tid != last_tid_) {
      last_tid_.assign(tid);
      last_lane_ = b_.lane(p, tid);
    }
    return {p, last_lane_};
  }

  Span make_span(const ChromeEventView& e, int64_t t0, int64_t t1) {
    Span s;
    s.t0 = t0;
    s.t1 = t1;
    last_ts_ = std::max(last_ts_, t1);
    s.name = b_.intern(e.name);
    s.stage = stage_for_chrome_event(e.name, e.cat);
    std::string extra;
    for (size_t i = 0; i < e.arg_count; ++i) {
      const ChromeArg& a = e.args[i];
      uint64_t u = 0;
      if (a.key == "step" && arg_uint(a.value, u)) {
        s.step = static_cast<uint32_t>(std::min<uint64_t>(u, kNoStep - 1));
      } else if (a.key == "epoch" && arg_uint(a.value, u)) {
        s.epoch = static_cast<uint16_t>(std::min<uint64_t>(u, 0xFFFF));
      } else if (a.key == "micro" && arg_uint(a.value, u)) {
        s.micro = static_cast<uint8_t>(std::min<uint64_t>(u, 0xFF));
      } else if (a.key == "bucket" && arg_uint(a.value, u)) {
        s.bucket = static_cast<uint16_t>(std::min<uint64_t>(u, kNoBucket));
      } else if ((a.key == "bytes" || a.key == "Bytes") && arg_uint(a.value, u)) {
        s.bytes = u;
      } else if (a.key == "batch" || a.key == "samples") {
        // part of our own export; not shown
      } else if (extra.size() < 240) {
        if (!extra.empty()) extra += "\n";
        extra.append(a.key);
        extra += ": ";
        extra.append(a.value.text.substr(0, 120));
      }
    }
    if (s.step == kNoStep && s.stage == static_cast<uint8_t>(Stage::step) && e.name.rfind("ProfilerStep#", 0) == 0) {
      int64_t n = 0;
      if (parse_int(e.name.substr(13), n) && n >= 0) s.step = static_cast<uint32_t>(n);
    }
    if (!extra.empty()) s.extra = b_.add_extra(std::move(extra));
    return s;
  }

  void span(const ChromeEventView& e, int64_t t0, int64_t t1) {
    if (!e.has_ts) return;
    auto [p, l] = where(e);
    b_.add_span(p, l, make_span(e, t0, t1));
  }

  void metadata(const ChromeEventView& e) {
    const ChromeValue* v = nullptr;
    if (e.name == "process_name" && (v = e.arg("name")) && v->type == ChromeValue::string) {
      b_.set_process_name(proc(e), v->text);
    } else if (e.name == "process_labels" && (v = e.arg("labels")) && v->type == ChromeValue::string) {
      b_.set_process_labels(proc(e), v->text);
    } else if (e.name == "process_sort_index" && (v = e.arg("sort_index")) && v->is_number()) {
      b_.set_process_sort(proc(e), static_cast<int64_t>(v->num));
    } else if (e.name == "thread_name" && (v = e.arg("name")) && v->type == ChromeValue::string) {
      auto [p, l] = where(e);
      b_.set_lane_name(p, l, v->text);
    } else if (e.name == "thread_sort_index" && (v = e.arg("sort_index")) && v->is_number()) {
      auto [p, l] = where(e);
      b_.set_lane_sort(p, l, static_cast<int64_t>(v->num));
    }
  }

  TimelineBuilder& b_;
  std::unordered_map<uint64_t, std::vector<Open>> open_;
  std::string last_pid_, last_tid_;
  int last_proc_ = -1, last_lane_ = -1;
  uint64_t ignored_ = 0, unmatched_end_ = 0;
  int64_t last_ts_ = std::numeric_limits<int64_t>::min();
};

bool build_from_chrome(std::string_view json, const std::string& source, Timeline& out, std::string& error) {
  TimelineBuilder b;
  ChromeToTimeline conv(b);
  ChromeDocInfo info;
  ChromeStatus st = parse_chrome_json(json, std::ref(conv), info);
  if (!st.ok()) {
    error = source.empty() ? st.message : source + ": " + st.message;
    return false;
  }
  conv.close(conv.last_ts());
  b.timeline().producer = info.producer();
  b.timeline().source = source;
  out = b.finish();
  if (out.producer == "ddp_profile")
    for (Process& p : out.processes) {
      int64_t r = 0;
      if (parse_int(p.key, r)) p.rank = static_cast<int>(r);
    }
  if (out.span_count == 0 && out.counter_samples == 0) out.problems.push_back("the trace holds no spans or counters");
  return true;
}

}  // namespace

bool timeline_from_chrome_text(std::string_view json, Timeline& out, std::string& error) {
  try {
    return build_from_chrome(json, "", out, error);
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
}

bool timeline_from_chrome_file(const std::string& path, Timeline& out, std::string& error) {
  std::string text;
  ChromeStatus st = read_chrome_bytes(path, text);
  if (!st.ok()) {
    error = st.message;
    return false;
  }
  try {
    return build_from_chrome(text, path, out, error);
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
}

bool load_timeline(const std::string& path, Timeline& out, std::string& error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    RunTrace run;
    if (!load_run(path, run, error)) return false;
    try {
      out = timeline_from_run(run);
    } catch (const std::bad_alloc&) {
      error = "out of memory while building the timeline";
      return false;
    }
    return true;
  }
  if (!std::filesystem::exists(path, ec)) {
    error = path + ": no such file or directory";
    return false;
  }
  return timeline_from_chrome_file(path, out, error);
}

// ---------------------------------------------------------------------------------------------------------------
size_t first_visible(const Row& row, int64_t t) {
  // Every span that overlaps t starts at or after t - max_dur.
  int64_t from = t - row.max_dur;
  auto it = std::lower_bound(row.spans.begin(), row.spans.end(), from,
                             [](const Span& s, int64_t v) { return s.t0 < v; });
  return static_cast<size_t>(it - row.spans.begin());
}

void query_row(const Row& row, const LodView& view, std::vector<DrawBox>& out) {
  const std::vector<Span>& s = row.spans;
  const size_t n = s.size();
  if (n == 0 || view.t1 < view.t0) return;
  const int64_t thr = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(view.min_px * view.ns_per_px)));
  size_t i = first_visible(row, view.t0);
  auto start_at_or_after = [&](size_t from, int64_t t) {
    auto it = std::lower_bound(s.begin() + static_cast<std::ptrdiff_t>(from), s.end(), t,
                               [](const Span& a, int64_t v) { return a.t0 < v; });
    return static_cast<size_t>(it - s.begin());
  };
  while (i < n && s[i].t0 <= view.t1) {
    if (s[i].t1 < view.t0) {
      ++i;
      continue;
    }
    if (s[i].t1 - s[i].t0 >= thr) {
      out.push_back({s[i].t0, s[i].t1, static_cast<uint32_t>(i), 1});
      ++i;
      continue;
    }
    // A run of small spans: extend while the next span starts within `thr` of the run's end, jumping by binary
    // search over everything that starts inside that window.
    int64_t run_t0 = s[i].t0, run_t1 = s[i].t1;
    size_t k = i + 1;
    while (k < n && run_t1 <= view.t1) {
      size_t j = start_at_or_after(k, run_t1 + thr);
      if (j == k) break;
      if (s[j - 1].t1 - s[j - 1].t0 >= thr) {  // a wide span ends the run; it is drawn on its own
        if (j - 1 > k) run_t1 = std::max(run_t1, s[j - 2].t1);
        k = j - 1;
        break;
      }
      run_t1 = std::max(run_t1, s[j - 1].t1);
      k = j;
    }
    out.push_back({run_t0, run_t1, static_cast<uint32_t>(i), static_cast<uint32_t>(k - i)});
    i = k;
  }
}

void query_counter(const CounterSeries& c, const LodView& view, std::vector<CounterPoint>& out) {
  const size_t n = c.t.size();
  if (n == 0) return;
  auto it = std::upper_bound(c.t.begin(), c.t.end(), view.t0);
  size_t i = it == c.t.begin() ? 0 : static_cast<size_t>(it - c.t.begin()) - 1;
  const int64_t col = std::max<int64_t>(1, static_cast<int64_t>(view.ns_per_px));
  while (i < n && c.t[i] <= view.t1 + col) {
    int64_t col_end = c.t[i] + col;
    size_t j = static_cast<size_t>(std::lower_bound(c.t.begin() + static_cast<std::ptrdiff_t>(i), c.t.end(), col_end) -
                                   c.t.begin());
    if (j <= i) j = i + 1;
    CounterPoint pt;
    pt.t = c.t[i];
    pt.lo = pt.hi = c.v[i];
    // many samples in one pixel: look at a bounded number of them
    size_t stride = std::max<size_t>(1, (j - i) / 64);
    for (size_t k = i; k < j; k += stride) {
      pt.lo = std::min(pt.lo, c.v[k]);
      pt.hi = std::max(pt.hi, c.v[k]);
    }
    pt.last = c.v[j - 1];
    pt.lo = std::min(pt.lo, pt.last);
    pt.hi = std::max(pt.hi, pt.last);
    out.push_back(pt);
    i = j;
  }
}

SpanStats span_stats(const Timeline& tl, uint32_t name, int process) {
  SpanStats st;
  std::vector<int64_t> d;
  for (size_t p = 0; p < tl.processes.size(); ++p) {
    if (process >= 0 && static_cast<size_t>(process) != p) continue;
    for (const Lane& l : tl.processes[p].lanes)
      for (const Row& r : l.rows)
        for (const Span& s : r.spans)
          if (s.name == name) {
            d.push_back(s.t1 - s.t0);
            st.bytes += s.bytes;
          }
  }
  st.count = d.size();
  if (d.empty()) return st;
  std::sort(d.begin(), d.end());
  for (int64_t x : d) st.total_ns += x;
  st.min_ns = d.front();
  st.max_ns = d.back();
  st.mean_ns = static_cast<double>(st.total_ns) / static_cast<double>(d.size());
  auto pct = [&](double q) { return static_cast<double>(d[std::min(d.size() - 1, static_cast<size_t>(q * d.size()))]); };
  st.p50_ns = pct(0.50);
  st.p90_ns = pct(0.90);
  st.p99_ns = pct(0.99);
  return st;
}

std::string format_duration(int64_t ns) {
  char buf[48];
  double a = std::fabs(static_cast<double>(ns));
  if (a < 1e3)
    std::snprintf(buf, sizeof(buf), "%lld ns", static_cast<long long>(ns));
  else if (a < 1e6)
    std::snprintf(buf, sizeof(buf), "%.3f us", static_cast<double>(ns) / 1e3);
  else if (a < 1e9)
    std::snprintf(buf, sizeof(buf), "%.3f ms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof(buf), "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

std::string format_bytes(double b) {
  char buf[48];
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", b, unit[u]);
  return buf;
}

}  // namespace ddp
