#pragma once
// Per-rank PyTorch profiler (Kineto) traces opened as one run: the same RunTrace our own run folders give, so the
// summary, the analysis, the export and the viewer read them unchanged. docs/kineto.md is the specification: which
// files are read, how a file's rank is known, the stage mapping (traces/kineto/kineto_map.h), the clock alignment
// (traces/kineto/kineto_align.h) and what a Kineto trace cannot show.
#include <functional>
#include <string>
#include <vector>

#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_map.h"
#include "traces/model/run_folder.h"

namespace ddp {

// True when `path` is one of our run folders (it holds a rank<R>.ddpt or a manifest.json).
bool is_run_folder(const std::string& path);
// True when `inputs` are to be read as Kineto traces: several inputs, a file, or a folder that is not one of our runs
// and holds *.json / *.json.gz files. Anything else (one of our runs, a missing path) is read as a run folder.
bool is_kineto_input(const std::vector<std::string>& inputs);

// Loads the traces `inputs` name: trace files (.json, .json.gz) or folders of them. A damaged or unreadable file is
// listed in run.problems with the rank it would have been, and the other ranks load. Returns false with `error` set
// (naming the files) when no rank loads, when a file's rank cannot be known, when two files claim the same rank or
// when their world sizes disagree. run.manifest holds source "kineto", the world size and the backend the files agree
// on; run.kineto the import report (kineto_report_json).
// Several files of one rank are its profiling cycles (traces/kineto/kineto_cycles.h): all analysed as one run, or
// only cycle `cycle` (1-based) when > 0; the report adds "cycles" and a note saying what was found.
// `each_file`, when set, is asked for a callback for every file it reads (its path), which then sees each of the
// file's events in the same reading, on that file's reader thread (files are read in parallel): the viewer builds its
// timeline so, reading every file once. Files the run leaves out (other cycles, damaged ones) are read too.
using KinetoFileEvents = std::function<ChromeEventFn(const std::string& path)>;
bool load_kineto_run(const std::vector<std::string>& inputs, const KinetoStageMap& map, RunTrace& run,
                     std::string& error, int cycle = 0, const KinetoFileEvents* each_file = nullptr);

// True when the run was loaded by load_kineto_run.
bool is_kineto_run(const RunTrace& run);

// Each loaded rank's trace file, and what moves its timestamps (baseTimeNanoseconds + ts, the rank's clock) onto the
// run's common clock with time zero at `origin_ns`: for re-reading the files in full (the viewer, the merged export).
// About how many bytes reading `inputs` goes through, for a progress bar's total: the JSON text of trace files (a
// gzip file's inflated size), the rank traces of run folders.
uint64_t trace_input_bytes(const std::vector<std::string>& inputs);

struct KinetoRankFile {
  int rank = 0;
  std::string path;
  int64_t shift_ns = 0;
  bool cut_off = false;  // the file ends inside its events (a killed job): reading it again ends `truncated`
  // With --steps (the run's manifest has a step_window): the file's events to keep are those touching
  // [keep_from_ns, keep_to_ns], in the file's own ts (before the shift).
  bool windowed = false;
  int64_t keep_from_ns = 0, keep_to_ns = 0;
  // An event at `ts_ns` lasting `dur_ns` (the file's clock) touches the window (always, without one).
  bool keeps_time(int64_t ts_ns, int64_t dur_ns) const {
    return !windowed || (ts_ns + (dur_ns > 0 ? dur_ns : 0) >= keep_from_ns && ts_ns <= keep_to_ns);
  }
};
std::vector<KinetoRankFile> kineto_rank_files(const RunTrace& run, int64_t origin_ns);
// The import report: {"files": [...], "reference_rank", "clock_alignment": [records.def's clock_alignment per rank],
// "notes": [...]}; null for our own runs.
nlohmann::json kineto_report_json(const RunTrace& run);
// The same as text: one line per rank's clock ("rank 1: +7.31 ms ± 0.12 ms from 96 collectives") and the notes.
std::string kineto_report_text(const RunTrace& run);

}  // namespace ddp
