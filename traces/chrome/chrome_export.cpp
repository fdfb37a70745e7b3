#include "traces/chrome/chrome_export.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "traces/base/json_out.h"
#include "traces/chrome/span_cpu_args.h"
#include "traces/model/batch_handoffs.h"
#include "traces/model/cuda_names.h"

namespace ddp {
namespace {

using Out = JsonOut;

const char* category(Stage s) {
  if (is_data_stage(s)) return "data";
  if (is_wait(s)) return "stall";
  if (s == Stage::allreduce || s == Stage::nccl) return "comm";
  if (is_gpu_activity(s)) return "gpu";
  if (s == Stage::step || s == Stage::checkpoint) return "step";
  return "compute";
}

// The separator, then one "M" event in the Chrome layout (json_out.h).
template <typename Value>
void metadata(Out& o, bool& first, const char* name, uint32_t pid, int tid, std::string_view key, const Value& value) {
  o.raw(first ? "\n" : ",\n");
  first = false;
  metadata_event(o, EventLayout::chrome, name, pid, tid < 0 ? kNoTid : tid, key, value);
}

// The whole document: metadata, then every rank's events on rank 0's clock from the run's first event.
void write_run(const RunTrace& run, Out& o, ExportStats& stats, const MoreEvents& more) {
  const int64_t origin = run.origin_ns();
  o.raw("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"ddp_profile\"");
  if (const nlohmann::json m = run.exported_manifest(); m.is_object()) {
    o.raw(",\"manifest\":");
    o.raw(m.dump());
  }
  o.raw("},\n\"traceEvents\":[");
  bool first = true;
  for (const RankTrace& r : run.ranks) {
    std::string host = r.meta.count("host") ? r.meta.at("host") : std::string();
    std::string pname = "rank " + std::to_string(r.rank) + (host.empty() ? "" : " (" + host + ")");
    if (!r.complete) pname += " [ended early]";
    metadata(o, first, "process_name", r.rank, -1, "name", std::string_view(pname));
    metadata(o, first, "process_sort_index", r.rank, -1, "sort_index", int64_t{r.rank});
    for (size_t lane = 0; lane < r.lanes.size(); ++lane) {
      metadata(o, first, "thread_name", r.rank, static_cast<int>(lane), "name", std::string_view(r.lanes[lane]));
      metadata(o, first, "thread_sort_index", r.rank, static_cast<int>(lane), "sort_index", static_cast<int64_t>(lane));
    }
    const int64_t shift = r.clock_offset_ns() - origin;
    const std::vector<std::string> names = cuda_event_names(r);
    const CudaLaunches launches = cuda_launches(r);
    SpanCpuCursor splits(r.cpu);
    for (size_t i = 0; i < r.events.size(); ++i) {
      const Event& e = r.events[i];
      o.raw(first ? "\n" : ",\n");
      first = false;
      if (e.is_span()) {
        Stage s = e.stage_id();
        const bool cuda = e.is_cuda();
        complete_event_head(o, EventLayout::chrome, cuda ? cuda_event_name(e, names) : stage_name(s),
                            cuda ? cuda_category(s) : category(s), r.rank, e.lane, e.t0 + shift, e.t1 - e.t0);
        o.raw("\"step\":");
        o.unum(e.step);
        o.raw(",\"epoch\":");
        o.unum(e.epoch);
        o.raw(",\"micro\":");
        o.unum(e.micro);
        if (!cuda && e.bucket_index() != kNoBucket) {
          o.raw(",\"bucket\":");
          o.unum(e.bucket_index());
        }
        if (e.value) {
          o.raw(",\"bytes\":");
          o.unum(e.value);
        }
        if (cuda) {
          o.raw(",\"stage\":\"");
          o.raw(stage_name(s));
          o.raw("\",\"correlation\":");
          o.unum(e.correlation_id());
        } else if (is_data_stage(s)) {
          o.raw(",\"batch\":");
          o.unum(e.batch_index());
        } else {
          o.raw(",\"samples\":");
          o.unum(e.samples());
        }
        if (const SpanCpu* c = splits.at(i)) write_cpu_args(o, *c, e.duration(), "", ",");
        o.raw("}}");
        if (is_gpu_activity(s) && e.correlation_id()) {
          auto it = launches.find(e.correlation_id());
          if (it != launches.end()) {
            const uint64_t id = (static_cast<uint64_t>(r.rank) << 32) | e.correlation_id();
            o.raw(",\n");
            flow_event(o, EventLayout::chrome, 's', "launch", id, r.rank, it->second->lane, it->second->t0 + shift);
            o.raw(",\n");
            flow_event(o, EventLayout::chrome, 'f', "launch", id, r.rank, e.lane, e.t0 + shift);
            ++stats.flows;
          }
        }
      } else {
        counter_event(o, counter_name(e.counter_id()), static_cast<int64_t>(r.rank), e.t0 + shift, e.value);
      }
      ++stats.events;
    }
    // The worker (or pin thread) that finished each batch -> the main thread's wait for it.
    for (const auto& [from, to] : batch_handoffs(r)) {
      const uint64_t id = (uint64_t{1} << 62) | (static_cast<uint64_t>(r.rank) << 40) | to;
      const Event &a = r.events[from], &b = r.events[to];
      o.raw(",\n");
      flow_event(o, EventLayout::chrome, 's', "batch", id, r.rank, a.lane, a.t0 + shift);
      o.raw(",\n");
      flow_event(o, EventLayout::chrome, 'f', "batch", id, r.rank, b.lane, b.t0 + shift);
      ++stats.flows;
    }
  }
  if (more && !more(o)) o.abandon();
  o.raw("\n]}\n");
}
}  // namespace

bool export_chrome(const RunTrace& run, const std::string& path, ExportStats& stats, std::string& error,
                   const MoreEvents& more) {
  // Written beside the target and renamed over it when whole: a full disk leaves the previous trace.json (or none),
  // never a truncated one.
  return write_json_file_atomically(
      path, [&](Out& o) { write_run(run, o, stats, more); }, stats.bytes, error);
}

}  // namespace ddp
