#include "traces/kineto/kineto_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unordered_map>

#include "traces/base/json_out.h"
#include "traces/chrome/span_cpu_args.h"
#include "traces/kineto/kineto_export_layout.h"
#include "traces/model/cuda_names.h"

namespace ddp {
namespace {
namespace fs = std::filesystem;
using namespace kineto_export;

// ---- the header: who wrote the file -----------------------------------------------------------------------------

// distributedInfo on one line, as Kineto writes it: `"rank": R` with a space, because HTA finds a file's rank with
// the regular expression "rank":\s+(\d+) on the first line that has one (nothing before this line may say "rank").
void distributed_info(JsonOut& o, const RunFacts& run, const RankTrace& r) {
  o.raw("  \"distributedInfo\": {\"backend\": ");
  o.str(run.backend);
  o.raw(", \"rank\": ");
  o.unum(r.rank);
  o.raw(", \"world_size\": ");
  o.unum(run.world);
  o.raw(", \"pg_count\": 1, \"pg_config\": [{\"pg_name\": ");
  o.str(kProcessGroupName);
  o.raw(", \"pg_desc\": \"default_pg\", \"backend_config\": ");
  o.str(run.backend_config);
  o.raw(", \"pg_size\": ");
  o.unum(run.world);
  o.raw(", \"ranks\": ");
  o.raw(run.group_ranks);  // "[0, 1, ...]", built once per export
  o.raw("}]},\n");
}

void device_properties(JsonOut& o, const RunFacts& run, const RankLayout& layout) {
  if (!run.gpu || layout.devices.empty()) return;
  o.raw("  \"deviceProperties\": [");
  bool first = true;
  for (uint32_t d : layout.devices) {
    o.raw(first ? "\n    " : ",\n    ");
    first = false;
    o.raw("{\"id\": ");
    o.unum(d);
    o.raw(", \"name\": ");
    o.str(run.gpu->name);
    o.raw(", \"totalGlobalMem\": ");
    o.unum(run.gpu->total_bytes);
    o.raw(", \"computeMajor\": ");
    o.num(run.gpu->cc_major);
    o.raw(", \"computeMinor\": ");
    o.num(run.gpu->cc_minor);
    o.raw("}");
  }
  o.raw("\n  ],\n");
}

// Where the file came from, so a reader of the Kineto file can find the run (and what the clock means).
void provenance(JsonOut& o, const RunFacts& run, const RankTrace& r) {
  o.raw("  \"ddp_profile\": {\"run\": ");
  o.str(run.dir);
  o.raw(", \"clock\": \"rank 0's\", \"clock_offset_ns\": ");
  o.num(r.clock_offset_ns());
  o.raw(", \"complete\": ");
  o.raw(r.complete ? "true" : "false");
  o.raw("},\n");
}

// ---- the events -----------------------------------------------------------------------------------------------

class RankWriter {
 public:
  RankWriter(JsonOut& o, const RunFacts& run, const RankTrace& r, const RankLayout& layout, KinetoExportStats& stats)
      : o_(o),
        run_(run),
        r_(r),
        layout_(layout),
        stats_(stats),
        names_(cuda_event_names(r)),
        launches_(cuda_launches(r)) {
    shift_ = r.clock_offset_ns() + run.ts_shift_ns;
    for (const Event& e : r.events)
      if (e.is_cuda()) external_id_ = std::max<uint64_t>(external_id_, e.correlation_id());
  }

  void write() {
    metadata();
    SpanCpuCursor splits(r_.cpu);
    for (size_t i = 0; i < r_.events.size(); ++i) {
      const Event& e = r_.events[i];
      cpu_ = splits.at(i);
      if (!e.is_span())
        counter(e);
      else if (e.is_cuda())
        cuda(e);
      else if (e.stage_id() == Stage::allreduce)
        collective(e);
      else
        host(e);
    }
  }

 private:
  void sep() {
    o_.raw(first_ ? "\n  " : ",\n  ");
    first_ = false;
  }
  const Thread& thread(uint8_t lane) const {
    return layout_.threads[std::min<size_t>(lane, layout_.threads.size() - 1)];
  }

  void meta(const char* name, int64_t pid, int64_t tid, const char* key, const std::string& text, int64_t number,
            bool is_text) {
    sep();
    if (is_text)
      metadata_event(o_, EventLayout::kineto, name, pid, tid, key, text);
    else
      metadata_event(o_, EventLayout::kineto, name, pid, tid, key, number);
  }

  // Processes and threads as Kineto lays them out: the rank's host threads under its pid, each GPU a process
  // (pid = device index) with a thread per stream.
  void metadata() {
    const std::string process =
        "ddp_profile rank " + std::to_string(r_.rank) + (run_.host(r_).empty() ? "" : " (" + run_.host(r_) + ")");
    meta("process_name", layout_.pid, 0, "name", process, 0, true);
    meta("process_labels", layout_.pid, 0, "labels", "CPU", 0, true);
    meta("process_sort_index", layout_.pid, 0, "sort_index", "", layout_.pid, false);
    for (uint32_t d : layout_.devices) {
      meta("process_name", d, 0, "name", process, 0, true);
      meta("process_labels", d, 0, "labels", "GPU " + std::to_string(d), 0, true);
      meta("process_sort_index", d, 0, "sort_index", "", kGpuSortIndexBase + d, false);
    }
    for (const Thread& t : layout_.threads) {
      meta("thread_name", t.pid, t.tid, "name", t.name, 0, true);
      meta("thread_sort_index", t.pid, t.tid, "sort_index", "", t.tid, false);
    }
  }

  void begin_x(std::string_view name, std::string_view cat, const Event& e, const Thread& t) {
    sep();
    complete_event_head(o_, EventLayout::kineto, name, cat, t.pid, t.tid, e.t0 + shift_, e.t1 - e.t0);
    ++stats_.events;
  }

  // Our own fields after Kineto's, so nothing is lost: the stage, the step and what the stage carries.
  void stage_args(const Event& e) {
    o_.raw(", \"ddp_stage\": \"");
    o_.raw(stage_name(e.stage_id()));
    o_.raw("\", \"ddp_step\": ");
    o_.unum(e.step);
    o_.raw(", \"ddp_epoch\": ");
    o_.unum(e.epoch);
    o_.raw(", \"ddp_micro\": ");
    o_.unum(e.micro);
    if (e.bucket_index() != kNoBucket) {
      o_.raw(", \"ddp_bucket\": ");
      o_.unum(e.bucket_index());
    }
    if (e.value) {
      o_.raw(", \"ddp_bytes\": ");
      o_.unum(e.value);
    }
    if (is_data_stage(e.stage_id())) {
      o_.raw(", \"ddp_batch\": ");
      o_.unum(e.batch_index());
    } else if (e.samples()) {
      o_.raw(", \"ddp_samples\": ");
      o_.unum(e.samples());
    }
    if (cpu_) write_cpu_args(o_, *cpu_, e.duration(), "ddp_", ", ");
  }

  // Host ops are numbered above every correlation id: CUDA records carry their correlation as "External id", and
  // readers (HTA, TensorBoard) tie a kernel to the host op whose External id it shares.
  void external_id() {
    o_.raw("\"External id\": ");
    o_.unum(++external_id_);
  }

  void host(const Event& e) {
    const HostName n = host_name(e, run_);
    begin_x(n.name, n.cat, e, thread(e.lane));
    external_id();
    stage_args(e);
    o_.raw("}}");
  }

  // The collective as PyTorch records it: record_param_comms (with its size, dtype and process group) around the
  // backend's own op (gloo:all_reduce / nccl:all_reduce), both spanning our allreduce.
  void collective(const Event& e) {
    const Thread& t = thread(e.lane);
    begin_x("record_param_comms", "cpu_op", e, t);
    external_id();
    comm_args(e);
    stage_args(e);
    o_.raw("}}");
    begin_x(run_.backend == "nccl" ? "nccl:all_reduce" : "gloo:all_reduce", "user_annotation", e, t);
    external_id();
    stage_args(e);
    o_.raw("}}");
  }

  void comm_args(const Event& e) {
    const CommSize size = comm_size(e.value);
    o_.raw(", \"Collective name\": \"allreduce\", \"In msg nelems\": ");
    o_.unum(size.nelems);
    o_.raw(", \"Out msg nelems\": ");
    o_.unum(size.nelems);
    o_.raw(", \"dtype\": \"");
    o_.raw(size.dtype);
    o_.raw("\", \"Group size\": ");
    o_.unum(run_.world);
    o_.raw(", \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": ");
    o_.str(kProcessGroupName);
    o_.raw(", \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": ");
    o_.str(run_.group_ranks);
    o_.raw(", \"Global rank start\": 0, \"Global rank stride\": 1");
  }

  void cuda(const Event& e) {
    const Thread& t = thread(e.lane);
    const Stage s = e.stage_id();
    begin_x(cuda_event_name(e, names_), cuda_category(s), e, t);
    o_.raw("\"External id\": ");
    o_.unum(e.correlation_id());
    if (is_gpu_activity(s)) {
      o_.raw(", \"device\": ");
      o_.unum(t.device);
      o_.raw(", \"stream\": ");
      o_.unum(t.stream);
    }
    o_.raw(", \"correlation\": ");
    o_.unum(e.correlation_id());
    if ((s == Stage::memset || s == Stage::memcpy_h2d || s == Stage::memcpy_d2h || s == Stage::memcpy_d2d) && e.value) {
      o_.raw(", \"bytes\": ");
      o_.unum(e.value);
    }
    if (s == Stage::nccl && e.value) comm_args(e);
    o_.raw(", \"ddp_stage\": \"");
    o_.raw(stage_name(s));
    o_.raw("\", \"ddp_step\": ");
    o_.unum(e.step);
    o_.raw("}}");
    if (is_gpu_activity(s)) flow(e, t);
  }

  // Kineto's launch arrow: "s" on the runtime call, "f" (binding to the enclosing slice) on the GPU work.
  void flow(const Event& gpu, const Thread& gpu_thread) {
    if (!gpu.correlation_id()) return;
    auto it = launches_.find(gpu.correlation_id());
    if (it == launches_.end()) return;
    const Thread& call = thread(it->second->lane);
    for (char ph : {'s', 'f'}) {
      const Thread& t = ph == 's' ? call : gpu_thread;
      sep();
      flow_event(o_, EventLayout::kineto, ph, "ac2g", gpu.correlation_id(), t.pid, t.tid,
                 (ph == 's' ? it->second->t0 : gpu.t0) + shift_);
      ++stats_.events;
    }
    ++stats_.flows;
  }

  // Counters (host memory, CUDA memory, the loader's queue) as Chrome counter tracks under the rank's process;
  // Kineto-only readers skip them.
  void counter(const Event& e) {
    sep();
    counter_event(o_, counter_name(e.counter_id()), layout_.pid, e.t0 + shift_, e.value);
    ++stats_.events;
  }

  JsonOut& o_;
  const RunFacts& run_;
  const RankTrace& r_;
  const RankLayout& layout_;
  KinetoExportStats& stats_;
  const std::vector<std::string> names_;
  const CudaLaunches launches_;  // correlation -> the runtime call that launched it
  int64_t shift_ = 0;
  uint64_t external_id_ = 0;
  bool first_ = true;
  const SpanCpu* cpu_ = nullptr;  // the CPU split of the event being written (its stage args say it)
};

void write_rank(JsonOut& o, const RunFacts& run, const RankTrace& r, KinetoExportStats& stats) {
  const RankLayout layout = rank_layout(run, r);
  o.raw("{\n  \"schemaVersion\": 1,\n");
  distributed_info(o, run, r);
  device_properties(o, run, layout);
  provenance(o, run, r);
  o.raw("  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
  o.num(run.base_ns);
  o.raw(",\n  \"traceName\": ");
  o.str(kineto_rank_trace_file(static_cast<int>(r.rank)));
  o.raw(",\n  \"traceEvents\": [");
  RankWriter(o, run, r, layout, stats).write();
  o.raw("\n  ]\n}\n");
}

}  // namespace

std::vector<std::string> foreign_trace_files(const RunTrace& run, const std::string& dir) {
  std::vector<std::string> ours, foreign;
  for (const RankTrace& r : run.ranks) ours.push_back(kineto_rank_trace_file(static_cast<int>(r.rank)));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_hta_input_name(name) && std::find(ours.begin(), ours.end(), name) == ours.end())
      foreign.push_back(e.path().string());
  }
  std::sort(foreign.begin(), foreign.end());
  return foreign;
}

bool export_kineto(const RunTrace& run, const std::string& dir, KinetoExportStats& stats, std::string& error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) {
    error = "cannot create the folder " + dir + (ec ? ": " + ec.message() : ": a file of that name is in the way");
    return false;
  }
  const RunFacts facts = run_facts(run);
  for (const RankTrace& r : run.ranks) {
    const std::string path = dir + "/" + kineto_rank_trace_file(static_cast<int>(r.rank));
    uint64_t bytes = 0;
    if (!write_json_file_atomically(
            path, [&](JsonOut& o) { write_rank(o, facts, r, stats); }, bytes, error))
      return false;
    stats.bytes += bytes;
    stats.files.push_back(path);
  }
  return true;
}

}  // namespace ddp
