// The run-folder adapter: native rank traces into the timeline model, and load_timeline, which opens either kind
// of input.
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "traces/flight_recorder/fr_dump.h"
#include "traces/model/cuda_names.h"
#include "traces/model/span_cpu.h"
#include "traces/native/load_run.h"
#include "traces/timeline/timeline.h"
#include "traces/timeline/timeline_sources.h"

namespace ddp {
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
// A process for rank `r`, named as the Chrome export names it, with the rank's named lanes in lane order.
int add_rank_process(TimelineBuilder& b, const RankTrace& r) {
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
  return p;
}

// The builder's lane for each event lane that holds spans (-1 for the others). Lanes are dense small ids: map them
// once.
std::array<int, 256> map_span_lanes(TimelineBuilder& b, int p, const RankTrace& r) {
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
    }
  return lane_of;
}

// Span event `e` on the run's clock (`shift` moves it from its rank's clock).
Span span_of(const Event& e, int64_t shift, SpanNames& names, TimelineBuilder& b) {
  Span s;
  s.t0 = e.t0 + shift;
  s.set_t1(e.t1 + shift);
  s.set_step(e.step);
  // a CUDA event's bucket field holds its name id
  s.detail = b.add_detail(e.value, e.is_cuda() ? kNoBucket : e.bucket_index(), 0, e.epoch, e.micro);
  s.stage = e.stage < kStageCount ? e.stage : kNoStage;
  s.name = names.of(e);
  return s;
}

}  // namespace

namespace timeline_detail {

int add_rank_to_timeline(TimelineBuilder& b, const RankTrace& r, int64_t origin_ns) {
  const int p = add_rank_process(b, r);
  const std::array<int, 256> lane_of = map_span_lanes(b, p, r);
  const int64_t shift = r.clock_offset_ns() - origin_ns;
  SpanNames names(b, r);
  SpanCpuCursor splits(r.cpu);
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Event& e = r.events[i];
    if (e.is_span()) {
      Span s = span_of(e, shift, names, b);
      if (const SpanCpu* c = splits.at(i)) s.detail = b.add_cpu_split(s.detail, c->cpu_us, c->wait_us);
      b.add_span(p, lane_of[e.lane], s);
    } else {
      b.add_counter(p, counter_name(e.counter_id()), e.t0 + shift, static_cast<double>(e.value));
    }
  }
  return p;
}

}  // namespace timeline_detail

Timeline timeline_from_run(const RunTrace& run) {
  TimelineBuilder b;
  Timeline& tl = b.timeline();
  tl.producer = "ddp_profile";
  tl.run_dir = run.dir;
  tl.source = run.dir;
  tl.problems = run.problems;
  const int64_t origin = run.origin_ns();
  tl.origin_ns = origin;
  size_t splits = 0;  // room for every rank's splits at once: no growth that copies them, no slack left
  for (const RankTrace& r : run.ranks) splits += r.cpu.size();
  b.reserve_cpu_splits(splits);
  for (const RankTrace& r : run.ranks) timeline_detail::add_rank_to_timeline(b, r, origin);
  return b.finish();  // the earliest event is at 0 already, so origin_ns stays the run's origin
}

bool load_timeline(const std::string& path, Timeline& out, std::string& error) {
  std::error_code ec;
  if (is_fr_input({path})) return timeline_from_fr_dumps({path}, out, error);
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

}  // namespace ddp
