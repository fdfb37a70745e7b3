#pragma once
// CUDA activity (kernels, copies, memsets, synchronisation, API calls) as ddp::Events on the span clock, recorded
// process-wide into the running recorder. The parts, each in its own header:
//   activity_source.h     what a source delivers (CUPTI in CUDA builds: cupti_source.cpp; a fake in tests)
//   clock_map.h           the source clock -> CLOCK_MONOTONIC ns
//   activity_naming.h     a record's stage, lane name and display name
//   activity_collector.h  records -> events, linked to the API call that launched them, into an EventSink
// Nothing here needs CUDA.
#include <memory>
#include <string>

#include "profiler/activity_collector.h"
#include "profiler/activity_naming.h"
#include "profiler/activity_source.h"
#include "profiler/clock_map.h"
#include "profiler/recorder.h"

namespace ddp::prof {

// Writes into the running recorder (prof::start): lanes via external_lane, names as meta "gpu_name/<id>".
class RecorderSink final : public EventSink {
 public:
  int lane(const std::string& name) override;
  void name(uint16_t id, const std::string& text) override;
  void events(uint8_t lane, const Event* events, size_t count) override;
};

// ---- the process-wide GPU recorder, used by the runtime ----------------------------------------------------------

struct GpuRecordingOptions {
  uint32_t flush_ms = 200;
  bool api = true;         // record the runtime API calls that launch GPU work and link the work to them
  bool driver_api = true;  // with api: also driver API calls (kernels launched through the driver API get linked)
};

// True in builds that carry the CUPTI source (DDP_PROFILE_CUPTI).
bool cupti_available();
// The CUPTI source, or nullptr in builds without CUPTI.
std::unique_ptr<ActivitySource> make_cupti_source(const GpuRecordingOptions& opt);

// Starts CUPTI activity recording into the running recorder. Returns false with a one-line reason (no CUPTI in this
// build, no driver, no device, CUPTI error) and leaves training untouched; call after prof::start.
bool gpu_start(const GpuRecordingOptions& opt, std::string& why);
// Starts recording from any source (tests, or a source the caller built).
bool gpu_start(std::unique_ptr<ActivitySource> source, const GpuRecordingOptions& opt, std::string& why);
// The step context for GPU work launched from now on; cheap, call once per micro-step (no-op when not recording).
void gpu_mark_step(const StepContext& ctx);
// Writes everything recorded so far (e.g. before a flush on SIGTERM); no-op when not recording.
void gpu_flush();
// Stops and writes everything; call before prof::stop. Returns the totals (all zero when GPU recording was off).
CollectorStats gpu_stop();
bool gpu_recording();

}  // namespace ddp::prof
