#include "traces/chrome/chrome_export.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "traces/model/cuda_names.h"
#include "traces/base/json_out.h"

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

void flow(Out& o, char ph, uint32_t pid, uint8_t tid, int64_t ts_ns, uint64_t id) {
  o.raw(",\n{\"ph\":\"");
  o.raw(std::string_view(&ph, 1));
  o.raw("\",\"name\":\"launch\",\"cat\":\"ac2g\",\"id\":");
  o.unum(id);
  o.raw(",\"pid\":");
  o.unum(pid);
  o.raw(",\"tid\":");
  o.unum(tid);
  o.raw(",\"ts\":");
  o.micros(ts_ns);
  if (ph == 'f') o.raw(",\"bp\":\"e\"");
  o.raw("}");
}

void metadata(Out& o, bool& first, const char* name, uint32_t pid, int tid, std::string_view key,
              const std::string& value, bool is_number) {
  o.raw(first ? "\n" : ",\n");
  first = false;
  o.raw("{\"ph\":\"M\",\"name\":\"");
  o.raw(name);
  o.raw("\",\"pid\":");
  o.unum(pid);
  if (tid >= 0) {
    o.raw(",\"tid\":");
    o.num(tid);
  }
  o.raw(",\"args\":{\"");
  o.raw(key);
  o.raw("\":");
  if (is_number)
    o.raw(value);
  else
    o.str(value);
  o.raw("}}");
}

// The whole document: metadata, then every rank's events on rank 0's clock from the run's first event.
void write_run(const RunTrace& run, Out& o, ExportStats& stats, const MoreEvents& more) {
  const int64_t origin = run.origin_ns();
  o.raw("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"ddp_profile\"");
  if (run.manifest.is_object()) {
    o.raw(",\"manifest\":");
    o.raw(run.manifest.dump());
  }
  o.raw("},\n\"traceEvents\":[");
  bool first = true;
  for (const RankTrace& r : run.ranks) {
    std::string host = r.meta.count("host") ? r.meta.at("host") : std::string();
    std::string pname = "rank " + std::to_string(r.rank) + (host.empty() ? "" : " (" + host + ")");
    if (!r.complete) pname += " [ended early]";
    metadata(o, first, "process_name", r.rank, -1, "name", pname, false);
    metadata(o, first, "process_sort_index", r.rank, -1, "sort_index", std::to_string(r.rank), true);
    for (size_t lane = 0; lane < r.lanes.size(); ++lane) {
      metadata(o, first, "thread_name", r.rank, static_cast<int>(lane), "name", r.lanes[lane], false);
      metadata(o, first, "thread_sort_index", r.rank, static_cast<int>(lane), "sort_index", std::to_string(lane),
               true);
    }
    const int64_t shift = r.clock_offset_ns() - origin;
    const std::vector<std::string> names = cuda_event_names(r);
    std::unordered_map<uint32_t, const Event*> launches;  // correlation -> the API call
    for (const Event& e : r.events)
      if (e.is_span() && e.stage_id() == Stage::cuda_api && e.correlation_id())
        launches.emplace(e.correlation_id(), &e);
    for (const Event& e : r.events) {
      o.raw(first ? "\n" : ",\n");
      first = false;
      if (e.is_span()) {
        Stage s = e.stage_id();
        const bool cuda = e.is_cuda();
        if (cuda) {
          o.raw("{\"ph\":\"X\",\"name\":");
          o.str(cuda_event_name(e, names));
          o.raw(",\"cat\":\"");
          o.raw(cuda_category(s));
        } else {
          o.raw("{\"ph\":\"X\",\"name\":\"");
          o.raw(stage_name(s));
          o.raw("\",\"cat\":\"");
          o.raw(category(s));
        }
        o.raw("\",\"pid\":");
        o.unum(r.rank);
        o.raw(",\"tid\":");
        o.unum(e.lane);
        o.raw(",\"ts\":");
        o.micros(e.t0 + shift);
        o.raw(",\"dur\":");
        o.micros(e.t1 - e.t0);
        o.raw(",\"args\":{\"step\":");
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
        o.raw("}}");
        if (is_gpu_activity(s) && e.correlation_id()) {
          auto it = launches.find(e.correlation_id());
          if (it != launches.end()) {
            const uint64_t id = (static_cast<uint64_t>(r.rank) << 32) | e.correlation_id();
            flow(o, 's', r.rank, it->second->lane, it->second->t0 + shift, id);
            flow(o, 'f', r.rank, e.lane, e.t0 + shift, id);
            ++stats.flows;
          }
        }
      } else {
        counter_event(o, counter_name(e.counter_id()), static_cast<int64_t>(r.rank), e.t0 + shift, e.value);
      }
      ++stats.events;
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
  return write_json_file_atomically(path, [&](Out& o) { write_run(run, o, stats, more); }, stats.bytes, error);
}

}  // namespace ddp
