#pragma once
// torch's Flight Recorder dumps, one per rank: the last N collectives each rank enqueued, per process group, with
// their sequence ids, ops, sizes and dtypes (torch 2.x; `TORCH_FR_BUFFER_SIZE`, NCCL and, since 2.9, Gloo). Written as
// JSON (`_dump_fr_trace_json`) or as a pickle (`_dump_fr_trace`, the NCCL watchdog's `TORCH_FR_DUMP_TEMP_FILE<rank>`
// files); both are read here into one typed form (docs/flight-recorder.md).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp {

struct FrEntry {
  int64_t record_id = -1;
  std::string group;           // the process group's id ("0": the default group)
  std::string group_name;      // its description where the dump gives one ("default_pg")
  int64_t collective_seq = 0;  // per group, 1 for its first collective; 0 for point-to-point
  int64_t p2p_seq = 0;
  bool is_p2p = false;
  std::string op;       // "all_reduce" (the backend prefix of profiling_name dropped)
  std::string backend;  // "gloo", "nccl"
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  std::string state;  // scheduled | started | completed
  bool retired = false;
  int64_t created_ns = 0;                    // wall clock (time_created_ns)
  int64_t started_ns = 0, completed_ns = 0;  // 0: not discovered (Gloo never sets them)
  double duration_ms = -1;                   // -1: not recorded
  int64_t timeout_ms = 0;
  std::string frame;  // the innermost Python frame outside torch that enqueued it, "file:line (function)"
};

struct FrGroup {
  std::string id, name, desc;
  std::vector<int> ranks;  // global ranks, from pg_config
};

// What a group's rank says of its own progress (pg_status): sequence ids, -1 where the dump has none.
struct FrGroupStatus {
  int64_t last_enqueued = -1, last_started = -1, last_completed = -1;
};

struct FrDump {
  std::string path;
  int rank = -1;                                // from the file name's trailing number (the dump itself does not say)
  std::string version;                          // the dump format's
  std::vector<FrEntry> entries;                 // in record order
  std::map<std::string, FrGroup> groups;        // by group id, where the config names ids
  std::map<std::string, FrGroupStatus> status;  // by group id
  std::vector<std::string> notes;               // what was read leniently
};

// Whether the first bytes are a Flight Recorder dump: a pickle, or JSON holding "entries" and "version" near its start.
bool looks_like_fr_dump(const std::string& path);

// Reads one dump (JSON or pickle, told by content). `rank` < 0: taken from the file name's trailing number.
bool read_fr_dump(const std::string& path, int rank, FrDump& out, std::string& error);

// Every dump among `inputs` (files, and folders' files whose content is a dump), sorted by rank; an error names the
// first file that fails, or two files of one rank.
bool read_fr_dumps(const std::vector<std::string>& inputs, std::vector<FrDump>& out, std::string& error);

// Whether the inputs (a folder, or files) hold Flight Recorder dumps rather than traces.
bool is_fr_input(const std::vector<std::string>& inputs);

}  // namespace ddp
