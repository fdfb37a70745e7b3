#pragma once
// Inside the Kineto export (traces/kineto/kineto_export.cpp): what the files say about the run (from its manifest),
// where each of a rank's lanes goes in Kineto's pid/tid layout, and which Kineto name and category each stage gets.
// docs/kineto.md ("Our runs as Kineto traces") quotes the table in host_name().
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traces/model/run_folder.h"

namespace ddp::kineto_export {

inline constexpr const char* kProcessGroupName = "0";           // our runs have one process group, the default
inline constexpr int64_t kGpuSortIndexBase = int64_t{1} << 24;  // Kineto's process_sort_index for GPU D: 2^24 + D

struct GpuFacts {
  std::string name;
  uint64_t total_bytes = 0;
  int cc_major = 0, cc_minor = 0;
};

// The run-wide facts every file repeats.
struct RunFacts {
  std::string dir;
  std::string backend = "unknown";  // gloo / nccl, from the manifest
  std::string backend_config;       // Kineto's pg_config backend_config: "cpu:gloo", "cuda:nccl"
  std::string optimizer = "Optimizer";
  std::string group_ranks;  // "[0, 1]"
  uint32_t world = 0;
  std::optional<GpuFacts> gpu;  // from the manifest's versions.cuda, on GPU runs
  // Kineto writes ts in microseconds relative to baseTimeNanoseconds, their sum being the wall clock. Our traces are
  // on the monotonic clock: base is the run's start (rank 0's trace file creation) rounded down to the second, and
  // an event at t (rank 0's clock) is written at t + ts_shift_ns.
  int64_t base_ns = 0;
  int64_t ts_shift_ns = 0;
  std::vector<std::pair<uint32_t, int64_t>> pids;  // rank -> its process id, from the manifest

  std::string host(const RankTrace& r) const;
  int64_t pid(uint32_t rank) const;
};

RunFacts run_facts(const RunTrace& run);

// One lane of a rank as a Kineto thread: host lanes under the rank's pid, GPU streams under the device's "process".
struct Thread {
  int64_t pid = 0, tid = 0;
  std::string name;  // Kineto's thread name: "thread <tid> (<lane>)", "stream <S>"
  bool gpu = false;
  uint32_t device = 0, stream = 0;
};

struct RankLayout {
  int64_t pid = 0;
  std::vector<Thread> threads;    // index = lane (one more, "unknown lane", for events on a lane never named)
  std::vector<uint32_t> devices;  // GPUs with streams in this rank, ascending
};

RankLayout rank_layout(const RunFacts& run, const RankTrace& r);

// The Kineto name and category of a host stage span (every stage except allreduce and CUDA activity).
struct HostName {
  std::string name;
  std::string_view cat;
};
HostName host_name(const Event& e, const RunFacts& run);

// A collective's size as record_param_comms says it: elements of a dtype (Float when the bytes are whole floats,
// else Byte; our gradient buckets are fp32).
struct CommSize {
  uint64_t nelems = 0;
  std::string_view dtype;
};
CommSize comm_size(uint64_t bytes);

}  // namespace ddp::kineto_export
