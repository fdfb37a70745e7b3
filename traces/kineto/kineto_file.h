#pragma once
// One PyTorch profiler (Kineto) trace file read into what the importer needs: who wrote it (rank, world size), its
// threads, and its events that are stages (traces/kineto/kineto_map.h), on the host's absolute clock. The JSON is read
// by the Chrome reader (traces/chrome/chrome_reader.h); every other event is left out here, so a big trace costs memory
// only for its stage spans. Internal to traces/kineto_*.cpp.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_map.h"
#include "traces/kineto/kineto_operators.h"

namespace ddp::kineto_detail {

// A stage span as Kineto recorded it.
struct KSpan {
  int64_t t0 = 0, t1 = 0;    // ns, host clock: baseTimeNanoseconds + ts (Kineto writes ts relative to that base)
  uint64_t bytes = 0;        // collectives: In msg nelems x dtype size, when the trace says
  uint32_t step = 0;         // ProfilerStep#N: N
  uint32_t correlation = 0;  // CUDA records: Kineto's "correlation" argument
  uint32_t name = 0;         // CUDA records: index into KFile::names
  uint16_t thread = 0;       // index into KFile::threads
  Stage stage = Stage::step;
  CollectiveSource collective = CollectiveSource::none;
  bool wait_until_first_op = false;  // a DataLoader __next__: the wait ends where its first operator starts
  // Collectives: the process group ("Process Group Name"), an index into KFile::process_groups; 0 = the trace does
  // not say. An index, not the name: a file keeps hundreds of thousands of spans.
  uint16_t pg = 0;
};

struct KFile {
  std::string path;
  std::string name;       // file name without folders
  int rank = -1;          // -1: unknown
  int world = -1;         // -1: unknown
  std::string rank_from;  // "distributedInfo" or "file name"
  std::string backend;    // distributedInfo.backend ("gloo", "nccl"), empty when the trace does not say
  int64_t base_ns = 0;    // baseTimeNanoseconds (0 in traces that have none)
  bool array_format = false;
  int schema_version = -1;           // the top-level schemaVersion, -1 when the trace has none
  std::vector<std::string> threads;  // thread names ("thread 29741 (python3)", "stream 7"), index = KSpan::thread
  std::vector<std::string> names;    // CUDA record names, index = KSpan::name
  std::vector<std::string> process_groups{""};  // index = KSpan::pg; 0 is "" (not said)
  std::vector<KSpan> spans;                     // in file order
  uint64_t events = 0;                          // every event in the file
  uint64_t negative_durations = 0;              // stage spans whose dur was below 0 (read as 0 long)
  ChromeStatus status;                          // not ok: the file is damaged or unreadable (spans are then empty)
  // A trace cut off by a killed job (the JSON ends inside traceEvents): the events before the cut are read and the
  // reader's `truncated` status is kept here, status itself is ok. The last step is then incomplete.
  ChromeStatus cut_off;
  std::string not_strict;  // what the reader read leniently (trailing commas, an unclosed array): said in the notes
  std::string digest;      // read from this digest (traces/kineto/kineto_digest.h), not from the trace `path` names
  // The operators in the untracked main-thread time (kineto_operators.h): found where --digest reads the trace and
  // kept in its digest, so that --analyze of digests names them as of the trace; absent when not looked for.
  std::optional<KinetoUntrackedOperators> untracked_operators;
};

// Reads `path`. A damaged file comes back with `status` set and nothing else trusted (a cut-off one with `cut_off`,
// its events before the cut kept; one without events with status `empty`); never throws on bad bytes.
// `also`, when set, sees every event too, in the same reading (the viewer's timeline), on this thread.
KFile read_kineto_file(const std::string& path, const KinetoStageMap& map, const ChromeEventFn* also = nullptr);

// The trace files and digests `inputs` name (files, or folders of them), in a stable order; false with `error` when
// an input is missing or a folder holds none.
bool list_trace_files(const std::vector<std::string>& inputs, std::vector<std::string>& files, std::string& error);
// Each file read, in parallel: a trace by read_kineto_file, a digest by read_digest (kineto_digest.h). `each_file`
// as load_kineto_run (kineto_import.h) takes it.
std::vector<KFile> read_trace_files(const std::vector<std::string>& files, const KinetoStageMap& map,
                                    const std::function<ChromeEventFn(const std::string& path)>* each_file);

// The rank a file name spells: rank<R>, rank-<R> or rank_<R> (also inside a longer name). False when none.
bool rank_from_file_name(const std::string& name, int& rank);

}  // namespace ddp::kineto_detail
