// The CUPTI activity source (builds with DDP_PROFILE_CUPTI=1 only). CUPTI hands us buffers to fill and gives them back
// completed, on its own thread or inside cuptiActivityFlushAll. As Kineto does, the completion callback only queues
// the buffer (CompletedBuffers, bounded); the collector's thread takes the queue in flush()/stop() and translates the
// records there (cupti_records.h), so CUPTI's thread never waits on our translation or on the collector's lock.
// Every CUPTI call's result is checked: start() fails with one line naming the call and CUPTI's reason, flush/stop
// report the first failure once and carry on. The driver is probed through dlopen first, so a machine without a GPU
// or driver gets "no NVIDIA driver" rather than a CUPTI error code, and nothing here links libcuda.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/clock.h"
#include "profiler/completed_buffers.h"
#include "profiler/cupti_records.h"
#include "profiler/gpu_activity.h"

namespace ddp::prof {
namespace {

constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kAlign = 8;
// Completed buffers waiting for the collector's thread (it takes them every flush, 200 ms by default): 32 x 4 MiB holds
// several hundred thousand records. A collector that falls this far behind loses buffers, counted, rather than let
// the training process's memory grow without bound.
constexpr size_t kMaxQueuedBuffers = 32;

// API calls that launch no GPU work and wait for nothing: state queries the frameworks make around every launch (seen
// on an H200 with LibTorch 2.11: ~600 cudaGetDevice, ~200 cuDevicePrimaryCtxGetState and ~85 cudaGetLastError per step
// of a 75-kernel step, 12x the launches). Their records cost CUPTI's time and the trace's space and say nothing about
// where time goes, so they are not recorded (Kineto leaves out the same kind of calls); launches, copies, memsets and
// every synchronising call still are, so GPU work stays linked to the call that launched it.
constexpr CUpti_CallbackId kQuietRuntimeApis[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
};
constexpr CUpti_CallbackId kQuietDriverApis[] = {
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetName,
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
    CUPTI_DRIVER_TRACE_CBID_cuGetErrorName,
};

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
        case 34:
          s = "CUDA_ERROR_STUB_LIBRARY: libcuda.so.1 is the toolkit's stub, not a driver";
          break;
        case 35:
          s = "CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than this CUDA";
          break;
        case 100:
          s = "CUDA_ERROR_NO_DEVICE";
          break;
        default:
          s = "unknown error";
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

uint64_t CUPTIAPI monotonic_timestamp() { return static_cast<uint64_t>(monotonic_ns()); }

// Records in a buffer, counted without translating them (a buffer refused while the queue is full).
uint64_t count_records(uint8_t* buffer, size_t valid) {
  uint64_t n = 0;
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++n;
  return n;
}

// Process-wide, as CUPTI's callbacks are: they reach only this queue, never a source, so a buffer completing while a
// source is destroyed touches nothing freed. A source opens it at start and closes it at stop. Never destroyed: CUPTI
// may still complete a buffer while the process exits.
CompletedBuffers& completed_buffers() {
  static CompletedBuffers* queue = new CompletedBuffers(kMaxQueuedBuffers);
  return *queue;
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

// CUPTI's thread (or the thread inside cuptiActivityFlushAll): queue the buffer and return.
void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  size_t cupti_lost = 0;
  // Asked here, not when the buffer is translated: the context may be gone by then.
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &cupti_lost) == CUPTI_SUCCESS)
    completed_buffers().count_lost(cupti_lost);
  if (valid > 0) {
    switch (completed_buffers().offer({buffer, valid})) {
      case CompletedBuffers::Offer::queued:
        return;  // the queue owns it now
      case CompletedBuffers::Offer::full:
        completed_buffers().count_lost(count_records(buffer, valid));
        break;
      case CompletedBuffers::Offer::closed:
        break;  // no source is recording
    }
  }
  std::free(buffer);
}

std::atomic<bool> g_source_running{false};  // one CUPTI source per process: CUPTI's callbacks are global

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
    bool expected = false;
    if (!g_source_running.compare_exchange_strong(expected, true)) {
      error = "CUPTI: another activity source is already running in this process";
      return false;
    }
    sink_ = std::move(sink);
    lost_at_start_ = completed_buffers().lost();
    completed_buffers().open();
    auto fail = [&](const char* call, CUptiResult r) {
      error = "CUPTI: " + cupti_error(call, r) + "; GPU activity is not recorded";
      disable_all();
      completed_buffers().close();
      g_source_running.store(false);
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
                                             CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};
    if (opt_.api) kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME});
    if (opt_.api && opt_.driver_api) kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
    for (CUpti_ActivityKind k : kinds) {
      if ((r = cuptiActivityEnable(k)) != CUPTI_SUCCESS) {
        std::string call = "cuptiActivityEnable(kind " + std::to_string(static_cast<int>(k)) + ")";
        return fail(call.c_str(), r);
      }
      enabled_.push_back(k);
    }
    if (opt_.api) quiet_trivial_apis();
    running_ = true;
    return true;
  }

  // After the API kinds are enabled (enabling a kind resets its per-API settings). A CUPTI without per-API control
  // (before CUDA 12.x) records them all: said once, training goes on.
  void quiet_trivial_apis() {
    CUptiResult r = CUPTI_SUCCESS;
    for (CUpti_CallbackId id : kQuietRuntimeApis)
      if (r == CUPTI_SUCCESS) r = cuptiActivityEnableRuntimeApi(id, 0);
    if (opt_.driver_api)
      for (CUpti_CallbackId id : kQuietDriverApis)
        if (r == CUPTI_SUCCESS) r = cuptiActivityEnableDriverApi(id, 0);
    if (r != CUPTI_SUCCESS)
      std::fprintf(stderr, "ddp_profile: CUPTI: %s; state-query API calls are recorded too\n",
                   cupti_error("cuptiActivityEnableRuntimeApi/DriverApi", r).c_str());
  }

  void flush(bool force) override {
    if (!running_) return;
    check("cuptiActivityFlushAll", cuptiActivityFlushAll(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0));
    deliver_completed();
  }

  void stop() override {
    if (!running_) return;
    disable_all();
    // The forced flush completes every buffer (onto the queue, on this thread); later completions are refused.
    check("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    completed_buffers().close();
    deliver_completed();
    running_ = false;
    g_source_running.store(false);
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

  uint64_t dropped() const override { return completed_buffers().lost() - lost_at_start_; }

 private:
  // Translates the queued buffers and hands their records to the sink, oldest buffer first. Flushes may come from
  // two threads (the collector's periodic flush, a SIGTERM flush): one translates at a time.
  void deliver_completed() {
    std::lock_guard<std::mutex> lock(deliver_mu_);
    for (CompletedBuffer& b : completed_buffers().take()) {
      deliver(b);
      std::free(b.data);
    }
  }

  void deliver(const CompletedBuffer& b) {
    batch_.clear();
    CUpti_Activity* rec = nullptr;
    for (;;) {
      CUptiResult r = cuptiActivityGetNextRecord(b.data, b.valid, &rec);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (r != CUPTI_SUCCESS) {
        check("cuptiActivityGetNextRecord", r);
        break;
      }
      ActivityRecord a;
      if (translate_cupti_record(rec, api_names_, a)) batch_.push_back(a);
    }
    if (!batch_.empty() && sink_) sink_(batch_.data(), batch_.size());
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
  uint64_t lost_at_start_ = 0;
  std::vector<CUpti_ActivityKind> enabled_;
  std::mutex deliver_mu_;
  std::vector<ActivityRecord> batch_;  // under deliver_mu_
  CuptiApiNames api_names_;            // under deliver_mu_
  std::atomic<bool> reported_{false};
};

}  // namespace

bool cupti_available() { return true; }

std::unique_ptr<ActivitySource> make_cupti_source(const GpuRecordingOptions& opt) {
  return std::make_unique<CuptiSource>(opt);
}

}  // namespace ddp::prof
