#include "profiler/gpu_activity.h"

#include <cxxabi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "profiler/clock.h"

namespace ddp::prof {

const char* mem_kind_name(MemKind k) {
  switch (k) {
    case MemKind::pageable: return "pageable";
    case MemKind::pinned: return "pinned";
    case MemKind::device: return "device";
    case MemKind::array: return "array";
    case MemKind::managed: return "managed";
    default: return "unknown";
  }
}

const char* sync_kind_name(SyncKind k) {
  switch (k) {
    case SyncKind::event_synchronize: return "cudaEventSynchronize";
    case SyncKind::stream_wait_event: return "cudaStreamWaitEvent";
    case SyncKind::stream_synchronize: return "cudaStreamSynchronize";
    case SyncKind::context_synchronize: return "cudaDeviceSynchronize";
    default: return "synchronize";
  }
}

// ---- clock -------------------------------------------------------------------------------------------------------

int64_t ClockMap::along(const Pair& a, double slope, uint64_t t) {
  const double dt = static_cast<double>(static_cast<int64_t>(t - a.src));
  return a.mono + static_cast<int64_t>(dt * slope);
}

void ClockMap::add(uint64_t source_ts, int64_t monotonic_ns) {
  // Pairs arrive in time order; one that does not advance the source clock carries no information.
  if (!pairs_.empty() && source_ts <= pairs_.back().src) {
    if (source_ts == pairs_.back().src) pairs_.back().mono = monotonic_ns;
    return;
  }
  pairs_.push_back({source_ts, monotonic_ns});
}

int64_t ClockMap::to_monotonic(uint64_t t) const {
  if (pairs_.empty()) return static_cast<int64_t>(t);
  if (pairs_.size() == 1) return along(pairs_[0], 1.0, t);
  auto slope = [](const Pair& a, const Pair& b) {
    return static_cast<double>(b.mono - a.mono) / static_cast<double>(b.src - a.src);
  };
  // The segment [i-1, i] containing t; before the first or after the last pair, the nearest segment extended.
  auto it = std::upper_bound(pairs_.begin(), pairs_.end(), t, [](uint64_t v, const Pair& p) { return v < p.src; });
  size_t i = static_cast<size_t>(it - pairs_.begin());
  if (i == 0) i = 1;
  if (i >= pairs_.size()) i = pairs_.size() - 1;
  const Pair& a = pairs_[i - 1];
  const Pair& b = pairs_[i];
  // A segment whose slope is far from 1 (the source clock was stepped between the pairs) is not interpolated across:
  // times take the offset of the pair on their side of the step.
  double s = slope(a, b);
  if (s < 0.5 || s > 2.0) return t < b.src ? along(a, 1.0, t) : along(b, 1.0, t);
  return along(a, s, t);
}

bool sample_source_clock(ActivitySource& src, uint64_t& source_ts, int64_t& mono_ns) {
  int64_t best = INT64_MAX;
  bool ok = false;
  for (int i = 0; i < 5; ++i) {
    uint64_t s = 0;
    int64_t m = 0;
    int64_t a = monotonic_ns();
    if (!src.clock_pair(s, m)) return false;
    int64_t b = monotonic_ns();
    if (b - a < best) {
      best = b - a;
      source_ts = s;
      mono_ns = m;
      ok = true;
    }
  }
  return ok;
}

// ---- naming --------------------------------------------------------------------------------------------------------

Stage stage_for(const ActivityRecord& r) {
  switch (r.kind) {
    // CUPTI gives the mangled name, and NCCL's kernels are C++ ("_Z29ncclDevKernel_AllReduce..."): no prefix test.
    case ActivityKind::kernel: return r.name.find("nccl") != std::string::npos ? Stage::nccl : Stage::kernel;
    case ActivityKind::memset: return Stage::memset;
    case ActivityKind::sync: return Stage::sync;
    case ActivityKind::runtime_api:
    case ActivityKind::driver_api: return Stage::cuda_api;
    case ActivityKind::memcpy: {
      auto host = [](MemKind k) { return k == MemKind::pageable || k == MemKind::pinned; };
      if (r.peer) return Stage::memcpy_d2d;
      if (host(r.src) && !host(r.dst)) return Stage::memcpy_h2d;
      if (!host(r.src) && host(r.dst)) return Stage::memcpy_d2h;
      if (host(r.src) && host(r.dst)) return Stage::memcpy_h2d;  // host-to-host through the driver: rare
      return Stage::memcpy_d2d;
    }
  }
  return Stage::kernel;
}

std::string gpu_lane_name(uint32_t device, uint32_t stream) {
  return "gpu" + std::to_string(device) + "/stream" + std::to_string(stream);
}

namespace {
std::string demangle(std::string_view name) {
  if (name.rfind("_Z", 0) != 0) return std::string(name);
  std::string z(name);
  int status = 0;
  char* d = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? std::string(d) : z;
  std::free(d);
  return out;
}

const char* copy_dir(const ActivityRecord& r) {
  switch (stage_for(r)) {
    case Stage::memcpy_h2d: return r.dst == MemKind::pageable || r.dst == MemKind::pinned ? "HtoH" : "HtoD";
    case Stage::memcpy_d2h: return "DtoH";
    default: return r.peer ? "PtoP" : "DtoD";
  }
}
}  // namespace

std::string display_name(const ActivityRecord& r) {
  constexpr size_t kMaxName = 1000;
  std::string s;
  switch (r.kind) {
    case ActivityKind::memcpy:
      s = std::string("memcpy ") + copy_dir(r) + " " + mem_kind_name(r.src) + "->" + mem_kind_name(r.dst);
      break;
    case ActivityKind::memset: s = std::string("memset ") + mem_kind_name(r.dst); break;
    case ActivityKind::sync: s = r.name.empty() ? sync_kind_name(r.sync) : std::string(r.name); break;
    default: s = r.name.empty() ? std::string(stage_name(stage_for(r))) : demangle(r.name);
  }
  if (s.size() > kMaxName) s.resize(kMaxName);
  return s;
}

// ---- the recorder as a sink ----------------------------------------------------------------------------------------

int RecorderSink::lane(const std::string& name) { return external_lane(name); }

void RecorderSink::name(uint16_t id, const std::string& text) { record_meta("gpu_name/" + std::to_string(id), text); }

void RecorderSink::events(uint8_t lane, const Event* events, size_t count) { record_external(lane, events, count); }

// ---- collector -----------------------------------------------------------------------------------------------------

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

void ActivityCollector::on_records(const ActivityRecord* records, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  auto to_ns = [&](uint64_t t) { return identity_clock_ ? static_cast<int64_t>(t) : clock_.to_monotonic(t); };
  // API records first: GPU records in the same batch can then link at once.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < count; ++i) {
      const ActivityRecord& r = records[i];
      const bool api = r.kind == ActivityKind::runtime_api || r.kind == ActivityKind::driver_api;
      if (api != (pass == 0)) continue;
      ++stats_.records;
      // A forced flush (a failing rank) hands over records of work still on the GPU with no timestamps: drawn, they
      // would sit at the clock's origin and stretch the timeline over decades.
      if ((r.start == 0 && r.end == 0) || r.end < r.start) {
        ++stats_.incomplete;
        continue;
      }
      const int64_t t0 = to_ns(r.start);
      Event e = make_span(stage_for(r), /*lane, set by emit()*/ 0, t0, std::max(t0, to_ns(r.end)));
      e.item = r.correlation;
      e.bucket = intern(display_name(r));
      if (api) {
        ++stats_.api_calls;
        auto tl = thread_lane_.find(r.thread);
        int lane = -1;
        if (tl != thread_lane_.end()) {
          lane = tl->second;
        } else {
          lane = lane_id("cuda_api/" + std::to_string(thread_lane_.size()));
          if (lane >= 0) thread_lane_.emplace(r.thread, static_cast<uint8_t>(lane));
        }
        if (lane < 0) {
          ++stats_.lost;
          continue;
        }
        StepContext c = step_at(e.t0);
        e.step = c.step;
        e.epoch = c.epoch;
        e.micro = c.micro;
        emit(static_cast<uint8_t>(lane), e);
        if (r.correlation) {
          if (api_.emplace(r.correlation, ApiInfo{e.t0, e.t1, static_cast<uint8_t>(lane)}).second)
            api_order_.push_back(r.correlation);
          if (api_order_.size() > kApiMemory) {
            size_t drop = api_order_.size() / 2;
            for (size_t k = 0; k < drop; ++k) api_.erase(api_order_[k]);
            api_order_.erase(api_order_.begin(), api_order_.begin() + static_cast<std::ptrdiff_t>(drop));
          }
        }
        continue;
      }
      Pending p;
      p.e = e;
      switch (r.kind) {
        case ActivityKind::kernel:
          ++stats_.kernels;
          if (e.stage_id() == Stage::nccl) ++stats_.nccl_kernels;
          break;
        case ActivityKind::memcpy:
          ++stats_.memcpys;
          p.e.value = r.bytes;
          if (e.stage_id() == Stage::memcpy_h2d && r.dst == MemKind::device) {
            if (r.src == MemKind::pinned) {
              stats_.memcpy_bytes_pinned += r.bytes;
              stats_.memcpy_ns_pinned += e.t1 - e.t0;
            } else if (r.src == MemKind::pageable) {
              stats_.memcpy_bytes_pageable += r.bytes;
              stats_.memcpy_ns_pageable += e.t1 - e.t0;
            }
          }
          break;
        case ActivityKind::memset:
          ++stats_.memsets;
          p.e.value = r.bytes;
          break;
        case ActivityKind::sync: ++stats_.syncs; break;
        default: ++stats_.lost; continue;
      }
      if (r.kind != ActivityKind::sync) p.lane = gpu_lane_name(r.device, r.stream);
      pending_.push_back(std::move(p));
    }
  }
  resolve(false, false);
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
    StepContext c = step_at(found ? api->second.t0 : e.t0);
    e.step = c.step;
    e.epoch = c.epoch;
    e.micro = c.micro;
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

// ---- process-wide ------------------------------------------------------------------------------------------------

namespace {
std::mutex g_gpu_mu;
RecorderSink g_sink;
std::unique_ptr<ActivityCollector> g_collector;
std::atomic<ActivityCollector*> g_active{nullptr};
}  // namespace

#if !DDP_PROFILE_CUPTI
bool cupti_available() { return false; }
std::unique_ptr<ActivitySource> make_cupti_source(const GpuRecordingOptions&) { return nullptr; }
#endif

bool gpu_start(const GpuRecordingOptions& opt, std::string& why) {
  auto src = make_cupti_source(opt);
  if (!src) {
    why = "this build has no CUPTI (configure with the CUDA toolkit and -DDDP_PROFILE_CUPTI=ON)";
    return false;
  }
  return gpu_start(std::move(src), opt, why);
}

bool gpu_start(std::unique_ptr<ActivitySource> source, const GpuRecordingOptions& opt, std::string& why) {
  std::lock_guard<std::mutex> lock(g_gpu_mu);
  if (g_collector) {
    why = "GPU activity recording already started";
    return false;
  }
  if (!recording()) {
    why = "the recorder is not running (call prof::start first)";
    return false;
  }
  CollectorOptions co;
  co.flush_ms = opt.flush_ms;
  auto c = std::make_unique<ActivityCollector>(std::move(source), g_sink, co);
  if (!c->start(why)) return false;
  g_collector = std::move(c);
  g_active.store(g_collector.get());
  return true;
}

void gpu_mark_step(const StepContext& ctx) {
  if (ActivityCollector* c = g_active.load(std::memory_order_acquire)) c->mark_step(ctx);
}

void gpu_flush() {
  std::lock_guard<std::mutex> lock(g_gpu_mu);
  if (g_collector) g_collector->flush(true);
}

CollectorStats gpu_stop() {
  std::lock_guard<std::mutex> lock(g_gpu_mu);
  if (!g_collector) return {};
  g_active.store(nullptr);
  CollectorStats s = g_collector->stop();
  g_collector.reset();
  return s;
}

bool gpu_recording() { return g_active.load() != nullptr; }

}  // namespace ddp::prof
