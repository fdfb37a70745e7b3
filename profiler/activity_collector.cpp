#include "profiler/activity_collector.h"

#include <algorithm>
#include <chrono>

#include "profiler/activity_naming.h"
#include "profiler/clock.h"

namespace ddp::prof {

namespace {
constexpr size_t kApiMemory = 1u << 17;  // correlations remembered for linking
constexpr int kPendingFlushes = 2;       // flushes an unmatched GPU record waits for its API record
}  // namespace

ActivityCollector::ActivityCollector(std::unique_ptr<ActivitySource> source, EventSink& sink, CollectorOptions opt)
    : source_(std::move(source)), sink_(sink), opt_(opt) {}

ActivityCollector::~ActivityCollector() { stop(); }

bool ActivityCollector::start(std::string& error) {
  if (started_) {
    error = "activity collector already started";
    return false;
  }
  if (!source_) {
    error = "no activity source";
    return false;
  }
  if (!source_->start([this](const ActivityRecord* r, size_t n) { on_records(r, n); }, error)) return false;
  started_ = true;
  calibrate();
  if (opt_.flush_ms > 0) thread_ = std::thread([this] { flush_loop(); });
  return true;
}

void ActivityCollector::calibrate() {
  uint64_t s = 0;
  int64_t m = 0;
  bool have = sample_source_clock(*source_, s, m);
  std::lock_guard<std::mutex> lock(mu_);
  if (!have) {
    identity_clock_ = true;
    return;
  }
  clock_.add(s, m);
}

void ActivityCollector::flush_loop() {
  std::unique_lock<std::mutex> lock(wake_mu_);
  while (!quit_) {
    wake_.wait_for(lock, std::chrono::milliseconds(opt_.flush_ms));
    if (quit_) break;
    lock.unlock();
    flush(false);
    lock.lock();
  }
}

void ActivityCollector::flush(bool force) {
  if (!started_ || stopped_) return;
  calibrate();  // before records are converted: they end before this moment
  source_->flush(force);
  std::lock_guard<std::mutex> lock(mu_);
  resolve(force, true);
  write_out();
}

CollectorStats ActivityCollector::stop() {
  if (!started_ || stopped_) return stats();
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    quit_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  calibrate();
  source_->stop();
  stopped_ = true;
  std::lock_guard<std::mutex> lock(mu_);
  resolve(true, true);
  write_out();
  stats_.source_dropped = source_->dropped();
  return stats_;
}

CollectorStats ActivityCollector::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CollectorStats s = stats_;
  if (source_) s.source_dropped = source_->dropped();
  return s;
}

void ActivityCollector::mark_step(const StepContext& ctx) { mark_step(ctx, monotonic_ns()); }

void ActivityCollector::mark_step(const StepContext& ctx, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!marks_.empty() && ns < marks_.back().first) ns = marks_.back().first;
  marks_.emplace_back(ns, ctx);
  if (marks_.size() > opt_.max_step_marks) marks_.erase(marks_.begin(), marks_.begin() + marks_.size() / 2);
}

StepContext ActivityCollector::step_at(int64_t ns) const {
  auto it = std::upper_bound(marks_.begin(), marks_.end(), ns,
                             [](int64_t v, const std::pair<int64_t, StepContext>& m) { return v < m.first; });
  if (it == marks_.begin()) return marks_.empty() ? StepContext{} : marks_.front().second;
  return std::prev(it)->second;
}

uint16_t ActivityCollector::intern(const std::string& text) {
  auto it = names_.find(text);
  if (it != names_.end()) return it->second;
  if (names_.size() >= opt_.max_names) return kNoBucket;
  uint16_t id = static_cast<uint16_t>(names_.size());
  names_.emplace(text, id);
  sink_.name(id, text);
  return id;
}

int ActivityCollector::lane_id(const std::string& name) {
  auto it = lanes_.find(name);
  if (it != lanes_.end()) return it->second;
  int id = sink_.lane(name);
  lanes_.emplace(name, id);
  return id;
}

void ActivityCollector::emit(uint8_t lane, const Event& e) {
  Event x = e;
  x.lane = lane;
  out_[lane].push_back(x);
}

void ActivityCollector::write_out() {
  for (auto& [lane, evs] : out_) {
    if (evs.empty()) continue;
    std::stable_sort(evs.begin(), evs.end(), [](const Event& a, const Event& b) { return a.t0 < b.t0; });
    sink_.events(lane, evs.data(), evs.size());
    stats_.events_written += evs.size();
    evs.clear();
  }
}

namespace {
bool is_api(const ActivityRecord& r) {
  return r.kind == ActivityKind::runtime_api || r.kind == ActivityKind::driver_api;
}

// A forced flush (a failing rank) hands over records of work still on the GPU with no timestamps: drawn, they would
// sit at the clock's origin and stretch the timeline over decades.
bool incomplete(const ActivityRecord& r) { return (r.start == 0 && r.end == 0) || r.end < r.start; }

void stamp_step(Event& e, const StepContext& c) {
  e.step = c.step;
  e.epoch = c.epoch;
  e.micro = c.micro;
}
}  // namespace

void ActivityCollector::on_records(const ActivityRecord* records, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  // API records first: GPU records in the same batch can then link at once.
  for (size_t i = 0; i < count; ++i)
    if (is_api(records[i])) take(records[i]);
  for (size_t i = 0; i < count; ++i)
    if (!is_api(records[i])) take(records[i]);
  resolve(false, false);
}

void ActivityCollector::take(const ActivityRecord& r) {
  ++stats_.records;
  if (incomplete(r)) {
    ++stats_.incomplete;
    return;
  }
  if (is_api(r))
    write_api_call(r, to_event(r));
  else
    hold_gpu_record(r, to_event(r));
}

Event ActivityCollector::to_event(const ActivityRecord& r) {
  auto to_ns = [&](uint64_t t) { return identity_clock_ ? static_cast<int64_t>(t) : clock_.to_monotonic(t); };
  const int64_t t0 = to_ns(r.start);
  Event e = make_span(stage_for(r), /*lane, set by emit()*/ 0, t0, std::max(t0, to_ns(r.end)));
  e.item = r.correlation;
  e.bucket = intern(display_name(r));
  return e;
}

int ActivityCollector::api_lane(uint32_t thread) {
  auto known = thread_lane_.find(thread);
  if (known != thread_lane_.end()) return known->second;
  int lane = lane_id("cuda_api/" + std::to_string(thread_lane_.size()));
  if (lane >= 0) thread_lane_.emplace(thread, static_cast<uint8_t>(lane));
  return lane;
}

void ActivityCollector::write_api_call(const ActivityRecord& r, Event e) {
  ++stats_.api_calls;
  const int lane = api_lane(r.thread);
  if (lane < 0) {
    ++stats_.lost;
    return;
  }
  stamp_step(e, step_at(e.t0));
  emit(static_cast<uint8_t>(lane), e);
  if (r.correlation) remember_api(r.correlation, ApiInfo{e.t0, e.t1, static_cast<uint8_t>(lane)});
}

void ActivityCollector::remember_api(uint32_t correlation, const ApiInfo& call) {
  if (api_.emplace(correlation, call).second) api_order_.push_back(correlation);
  if (api_order_.size() > kApiMemory) {
    size_t drop = api_order_.size() / 2;
    for (size_t k = 0; k < drop; ++k) api_.erase(api_order_[k]);
    api_order_.erase(api_order_.begin(), api_order_.begin() + static_cast<std::ptrdiff_t>(drop));
  }
}

bool ActivityCollector::count_gpu_record(const ActivityRecord& r, const Event& e) {
  switch (r.kind) {
    case ActivityKind::kernel:
      ++stats_.kernels;
      if (e.stage_id() == Stage::nccl) ++stats_.nccl_kernels;
      return true;
    case ActivityKind::memcpy:
      ++stats_.memcpys;
      if (e.stage_id() == Stage::memcpy_h2d && r.dst == MemKind::device) {
        if (r.src == MemKind::pinned) {
          stats_.memcpy_bytes_pinned += r.bytes;
          stats_.memcpy_ns_pinned += e.t1 - e.t0;
        } else if (r.src == MemKind::pageable) {
          stats_.memcpy_bytes_pageable += r.bytes;
          stats_.memcpy_ns_pageable += e.t1 - e.t0;
        }
      }
      return true;
    case ActivityKind::memset:
      ++stats_.memsets;
      return true;
    case ActivityKind::sync:
      ++stats_.syncs;
      return true;
    default:
      ++stats_.lost;
      return false;
  }
}

void ActivityCollector::hold_gpu_record(const ActivityRecord& r, const Event& e) {
  if (!count_gpu_record(r, e)) return;
  Pending p;
  p.e = e;
  if (r.kind == ActivityKind::memcpy || r.kind == ActivityKind::memset) p.e.value = r.bytes;
  if (r.kind != ActivityKind::sync) p.lane = gpu_lane_name(r.device, r.stream);
  pending_.push_back(std::move(p));
}

void ActivityCollector::resolve(bool force, bool age) {
  size_t keep = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    auto api = p.e.item ? api_.find(p.e.item) : api_.end();
    const bool found = api != api_.end();
    // Unmatched records wait a couple of flushes for their API record (a different CUPTI buffer).
    if (!found && !force && (!age || p.waited < kPendingFlushes)) {
      if (age) ++p.waited;
      if (keep != i) pending_[keep] = std::move(p);
      ++keep;
      continue;
    }
    Event e = p.e;
    stamp_step(e, step_at(found ? api->second.t0 : e.t0));
    int lane = -1;
    if (!p.lane.empty())
      lane = lane_id(p.lane);
    else
      lane = found ? api->second.lane : lane_id("cuda_api/sync");
    if (found && e.stage_id() != Stage::sync) ++stats_.gpu_linked;
    if (found && e.stage_id() == Stage::sync) {
      // Drawn inside the API call that waited (same lane): keep it nested in that call.
      e.t0 = std::clamp(e.t0, api->second.t0, api->second.t1);
      e.t1 = std::clamp(e.t1, e.t0, api->second.t1);
    }
    if (lane < 0)
      ++stats_.lost;
    else
      emit(static_cast<uint8_t>(lane), e);
  }
  pending_.resize(keep);
}

}  // namespace ddp::prof
