#pragma once
// A run folder: manifest.json, one native trace per rank (rank<R>.ddpt), trace.json, the checks' files, logs,
// heartbeats and checkpoints. This file is the one place their names are spelled (docs/run-folder.md); everything
// that opens a run's traces goes through load_run (traces/native/load_run.h).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/run_trace.h"

namespace ddp {

// --- names, relative to the run folder ---------------------------------------------------------------------------
inline const char* kManifestFile = "manifest.json";
inline const char* kChromeTraceFile = "trace.json";
inline const char* kPerfettoTraceFile = "trace.pftrace";  // --export --format perfetto's default
inline const char* kRunStatusFile = "run_status.json";  // the supervisor's verdict: exit code, culprit, per-rank exits
inline const char* kChecksFile = "checks.json";         // --check's results
inline const char* kCheckMainRun = "main";              // --check: the verification run the ladder judges
// --check's other runs: checkpoint.resume's straight, killed and resumed runs, and faults.exit's fault_<kind> runs.
inline const char* kCheckResumeStraight = "resume_straight";
inline const char* kCheckResumeKilled = "resume_killed";
inline const char* kCheckResumeResumed = "resume_resumed";
inline std::string check_fault_run(const std::string& kind) { return "fault_" + kind; }
inline const char* kLogsDir = "logs";
inline const char* kProgressDir = "progress";
inline const char* kVerifyDir = "verify";
std::string rank_trace_file(int rank);  // rank<R>.ddpt
bool is_rank_trace_file(const std::string& name, int* rank = nullptr);
std::string rank_log_file(int rank);       // logs/rank<R>.log
std::string rank_progress_file(int rank);  // progress/rank<R>.bin
// The verification log: one JSON-lines file per rank and kind (consumed samples, replica hashes, tensor summaries).
inline const char* kVerifySamples = "samples";
inline const char* kVerifyReplicas = "replicas";
inline const char* kVerifySummaries = "summaries";
std::string verify_log_file(int rank, const char* kind);                                  // verify/rank<R>.<kind>.jsonl
bool is_verify_log_file(const std::string& name, const char* kind, int* rank = nullptr);  // name inside verify/
inline std::string verify_samples_file(int rank) { return verify_log_file(rank, kVerifySamples); }
inline std::string verify_replicas_file(int rank) { return verify_log_file(rank, kVerifyReplicas); }
inline std::string verify_summaries_file(int rank) { return verify_log_file(rank, kVerifySummaries); }
// Kinds only the Python companion writes (a user's script): gradient collectives per micro-step, checkpoint saves,
// the final state's hashes.
inline const char* kVerifyCollectives = "collectives";
inline const char* kVerifyCheckpoints = "checkpoints";
inline const char* kVerifyFinal = "final";
inline const char* kVerifyTraining = "training";           // per optimizer step: gradients, modes, lr, memory
inline const char* kVerifyResumePoints = "resume_points";  // the state at the first forward after each save
std::string companion_meta_file(int rank);  // verify/rank<R>.meta.json: what the companion found (world, sampler...)
// verify/reference_step<S>.safetensors: the companion's single-process reference (traces/base/safetensors.h)
std::string reference_step_file(int64_t step);
std::string reference_meta_file(int64_t step);  // verify/reference_step<S>.json: its layer kinds and batch sizes
inline const char* kLaunchLogFile = "logs/launch.log";  // a user's launch command's combined output
inline const char* kCompanionDir = "companion";  // the companion ddp_profile put first on a user's job's PYTHONPATH
// checkpoints/save<k>/rank<R>/<name>: a script's k-th save, under the name it gave it (a resume may read it back)
std::string companion_save_copy_file(int save, int rank, const std::string& name);
std::string verify_step_file(int rank, int64_t step);  // verify/rank<R>_step<S>.pt: our job's (LibTorch's pickler)
// verify/rank<R>_step<S>.safetensors: a user's rank's, written by the companion (traces/base/safetensors.h)
std::string companion_verify_step_file(int rank, int64_t step);
bool is_verify_step_file(const std::string& name, int* rank = nullptr, int64_t* step = nullptr);
std::string checkpoint_folder(int64_t step);  // checkpoints/step<k>
std::string checkpoint_rank_file(int rank);   // rank<R>.pt, inside a checkpoint folder
// --export RUN --format kineto: one PyTorch profiler (Kineto) trace per rank in the output folder (docs/kineto.md).
std::string kineto_rank_trace_file(int rank);  // rank<R>.pt.trace.json
// A user's job called hung: the supervisor creates the request, each rank's companion answers with its Flight
// Recorder dump (torch's pickle, stack frames kept), read by traces/flight_recorder (docs/flight-recorder.md).
inline const char* kFlightRecorderDir = "flight_recorder";
inline const char* kFlightRecorderRequest = "flight_recorder/request";
std::string flight_recorder_dump_file(int rank);  // flight_recorder/rank<R>.pkl
// A user's job under --record: each process of a rank (the training process, every DataLoader worker process) writes
// its data-path events and a header naming its lanes (records.def datapath_process), by process id.
inline const char* kDatapathDir = "datapath";
std::string datapath_events_file(int rank, int64_t pid);  // datapath/rank<R>.p<pid>.events
std::string datapath_header_file(int rank, int64_t pid);  // datapath/rank<R>.p<pid>.json
// Files our Kineto importer reads from a folder: *.json and *.json.gz, except the run folder's own JSON files.
bool is_trace_file_name(const std::string& name);
// manifest.json, trace.json, run_status.json, checks.json: never a rank's profiler trace.
bool is_run_folder_file(const std::string& name);
// Files HTA reads from a folder: every *.json and every *.gz (an export folder must hold none but ours).
bool is_hta_input_name(const std::string& name);
// DIR/NAME for a name above.
inline std::string in_run(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// The largest world a trace or manifest may claim: beyond it a number is damage (or a typo), not a job, and would make
// readers and exporters list billions of ranks.
inline constexpr uint32_t kMaxWorldSize = 1u << 16;

}  // namespace ddp
