// The CUPTI activity source (builds with DDP_PROFILE_CUPTI=1 only). CUPTI hands us buffers to fill; completed buffers
// come back on CUPTI's thread or inside cuptiActivityFlushAll, and we translate their records into ActivityRecords.
// Every CUPTI call's result is checked: start() fails with one line naming the call and CUPTI's reason, flush/stop
// report the first failure once and carry on. The driver is probed through dlopen first, so a machine without a GPU
// or driver gets "no NVIDIA driver" rather than a CUPTI error code, and nothing here links libcuda.
#include <dlfcn.h>

#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/clock.h"
#include "profiler/gpu_activity.h"

namespace ddp::prof {
namespace {

constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kAlign = 8;

std::string cupti_error(const char* call, CUptiResult r) {
  const char* text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || !text) text = "unknown error";
  return std::string(call) + " failed: " + text + " (" + std::to_string(static_cast<int>(r)) + ")";
}

// The driver, probed without linking it: returns "" when a device is usable, else the reason.
std::string probe_driver() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "no NVIDIA driver (libcuda.so.1 cannot be loaded)";
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using ErrFn = int (*)(int, const char**);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "cuDeviceGetCount"));
  auto errstr = reinterpret_cast<ErrFn>(::dlsym(lib, "cuGetErrorString"));
  if (!init || !count) return "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
  auto why = [&](const char* call, int rc) {
    const char* s = nullptr;
    if (!errstr || errstr(rc, &s) != 0 || !s) {
      switch (rc) {  // the stub driver cannot even name its errors
        case 34: s = "CUDA_ERROR_STUB_LIBRARY: libcuda.so.1 is the toolkit's stub, not a driver"; break;
        case 35: s = "CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than this CUDA"; break;
        case 100: s = "CUDA_ERROR_NO_DEVICE"; break;
        default: s = "unknown error";
      }
    }
    return std::string(call) + " failed: " + s + " (" + std::to_string(rc) + ")";
  };
  if (int rc = init(0); rc != 0) return why("cuInit", rc);
  int n = 0;
  if (int rc = count(&n); rc != 0) return why("cuDeviceGetCount", rc);
  if (n == 0) return "no CUDA device";
  return "";  // the library stays loaded: CUDA itself will use it
}

MemKind mem_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return MemKind::pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return MemKind::pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return MemKind::device;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return MemKind::array;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return MemKind::managed;
    default: return MemKind::unknown;
  }
}

SyncKind sync_kind(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return SyncKind::event_synchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return SyncKind::stream_wait_event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return SyncKind::stream_synchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return SyncKind::context_synchronize;
    default: return SyncKind::unknown;
  }
}

uint64_t CUPTIAPI monotonic_timestamp() { return static_cast<uint64_t>(monotonic_ns()); }

class CuptiSource;
std::atomic<CuptiSource*> g_source{nullptr};
// Held while a completed buffer is parsed and while stop() detaches the source: CUPTI delivers buffers on its own
// thread, and one that arrives as recording stops must not reach a source (or its sink) being destroyed.
std::mutex g_delivery_mu;

class CuptiSource final : public ActivitySource {
 public:
  explicit CuptiSource(const GpuRecordingOptions& opt) : opt_(opt) {}
  ~CuptiSource() override { stop(); }
  const char* name() const override { return "cupti"; }

  bool start(RecordSink sink, std::string& error) override {
    if (std::string why = probe_driver(); !why.empty()) {
      error = "CUPTI: " + why + "; GPU activity is not recorded";
      return false;
    }
    CuptiSource* expected = nullptr;
    if (!g_source.compare_exchange_strong(expected, this)) {
      error = "CUPTI: another activity source is already running in this process";
      return false;
    }
    sink_ = std::move(sink);
    auto fail = [&](const char* call, CUptiResult r) {
      error = "CUPTI: " + cupti_error(call, r) + "; GPU activity is not recorded";
      disable_all();
      g_source.store(nullptr);
      return false;
    };
    // The timestamp callback goes first, so every record is on CLOCK_MONOTONIC; when it cannot be registered the
    // collector calibrates CUPTI's own clock against ours instead.
    CUptiResult r = cuptiActivityRegisterTimestampCallback(&monotonic_timestamp);
    monotonic_ = r == CUPTI_SUCCESS;
    if (!monotonic_)
      std::fprintf(stderr, "ddp_profile: CUPTI: %s; calibrating CUPTI's clock instead\n",
                   cupti_error("cuptiActivityRegisterTimestampCallback", r).c_str());
    if ((r = cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed)) != CUPTI_SUCCESS)
      return fail("cuptiActivityRegisterCallbacks", r);
    std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
                                             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_RUNTIME};
    if (opt_.driver_api) kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
    for (CUpti_ActivityKind k : kinds) {
      if ((r = cuptiActivityEnable(k)) != CUPTI_SUCCESS) {
        std::string call = "cuptiActivityEnable(kind " + std::to_string(static_cast<int>(k)) + ")";
        return fail(call.c_str(), r);
      }
      enabled_.push_back(k);
    }
    running_ = true;
    return true;
  }

  void flush(bool force) override {
    if (!running_) return;
    check("cuptiActivityFlushAll", cuptiActivityFlushAll(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0));
  }

  void stop() override {
    if (!running_) return;
    disable_all();
    // The flush delivers on this thread (through on_buffer_completed): detach only after it, under the lock.
    check("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    running_ = false;
    std::lock_guard<std::mutex> lock(g_delivery_mu);
    g_source.store(nullptr);
  }

  bool clock_pair(uint64_t& source_ts, int64_t& mono) override {
    if (monotonic_ || !running_) return false;
    uint64_t t = 0;
    int64_t a = monotonic_ns();
    if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return false;
    int64_t b = monotonic_ns();
    source_ts = t;
    mono = a + (b - a) / 2;
    return true;
  }

  uint64_t dropped() const override { return dropped_.load(); }

 private:
  static void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;  // as many as fit
  }

  static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
    {
      std::lock_guard<std::mutex> lock(g_delivery_mu);
      CuptiSource* self = g_source.load();
      if (self && valid > 0) self->parse(ctx, stream, buffer, valid);
    }
    std::free(buffer);
  }

  void parse(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t valid) {
    batch_.clear();
    CUpti_Activity* rec = nullptr;
    for (;;) {
      CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &rec);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (r != CUPTI_SUCCESS) {
        check("cuptiActivityGetNextRecord", r);
        break;
      }
      ActivityRecord a;
      if (translate(rec, a)) batch_.push_back(a);
    }
    if (!batch_.empty() && sink_) sink_(batch_.data(), batch_.size());
    size_t lost = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &lost) == CUPTI_SUCCESS) dropped_ += lost;
  }

  // The fields every device-side record (kernel, memcpy, memset) carries under the same names.
  template <typename Record>
  static void device_fields(const Record* r, ActivityRecord& a) {
    a.device = r->deviceId;
    a.stream = r->streamId;
    a.correlation = r->correlationId;
    a.start = r->start;
    a.end = r->end;
  }
  template <typename Record>
  static void memcpy_fields(const Record* m, ActivityRecord& a) {
    a.kind = ActivityKind::memcpy;
    a.src = mem_kind(m->srcKind);
    a.dst = mem_kind(m->dstKind);
    a.bytes = m->bytes;
    device_fields(m, a);
  }

  bool translate(const CUpti_Activity* rec, ActivityRecord& a) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        a.kind = ActivityKind::kernel;
        device_fields(k, a);
        a.name = k->name ? k->name : "";
        return true;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        memcpy_fields(reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec), a);
        return true;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        memcpy_fields(reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec), a);
        a.peer = true;
        return true;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        a.kind = ActivityKind::memset;
        a.dst = mem_kind(static_cast<uint8_t>(m->memoryKind));
        a.bytes = m->bytes;
        device_fields(m, a);
        return true;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
        a.kind = ActivityKind::sync;
        a.sync = sync_kind(s->type);
        a.stream = s->streamId;
        a.correlation = s->correlationId;
        a.start = s->start;
        a.end = s->end;
        return true;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        const bool runtime = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        a.kind = runtime ? ActivityKind::runtime_api : ActivityKind::driver_api;
        a.thread = api->threadId;
        a.correlation = api->correlationId;
        a.start = api->start;
        a.end = api->end;
        a.name = api_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api->cbid);
        return true;
      }
      default: return false;
    }
  }

  // cuptiGetCallbackName's string, cached per (domain, cbid); the cache outlives the delivery call.
  const std::string& api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    auto key = (static_cast<uint64_t>(domain) << 32) | cbid;
    auto it = api_names_.find(key);
    if (it != api_names_.end()) return it->second;
    const char* n = nullptr;
    std::string s;
    if (cuptiGetCallbackName(domain, cbid, &n) == CUPTI_SUCCESS && n)
      s = n;
    else
      s = (domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "cudaRuntime#" : "cuDriver#") + std::to_string(cbid);
    return api_names_.emplace(key, std::move(s)).first->second;
  }

  void disable_all() {
    for (CUpti_ActivityKind k : enabled_) check("cuptiActivityDisable", cuptiActivityDisable(k));
    enabled_.clear();
  }

  void check(const char* call, CUptiResult r) {
    if (r == CUPTI_SUCCESS || r == CUPTI_ERROR_MAX_LIMIT_REACHED) return;
    if (!reported_.exchange(true))
      std::fprintf(stderr, "ddp_profile: CUPTI: %s; GPU activity may be incomplete\n", cupti_error(call, r).c_str());
  }

  GpuRecordingOptions opt_;
  RecordSink sink_;
  bool running_ = false;
  bool monotonic_ = false;
  std::vector<CUpti_ActivityKind> enabled_;
  std::vector<ActivityRecord> batch_;
  std::map<uint64_t, std::string> api_names_;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<bool> reported_{false};
};

}  // namespace

bool cupti_available() { return true; }

std::unique_ptr<ActivitySource> make_cupti_source(const GpuRecordingOptions& opt) {
  return std::make_unique<CuptiSource>(opt);
}

}  // namespace ddp::prof
