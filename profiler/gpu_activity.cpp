#include "profiler/gpu_activity.h"

#include <atomic>
#include <mutex>

namespace ddp::prof {

// ---- the recorder as a sink ----------------------------------------------------------------------------------------

int RecorderSink::lane(const std::string& name) { return external_lane(name); }

void RecorderSink::name(uint16_t id, const std::string& text) { record_meta("gpu_name/" + std::to_string(id), text); }

void RecorderSink::events(uint8_t lane, const Event* events, size_t count) { record_external(lane, events, count); }

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
