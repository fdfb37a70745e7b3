#pragma once
// What the command line asks for, as parsed (runtime/launch/cli/cli.h parses it): the mode, the job's options, and the
// trace commands' inputs and options. Here, below every room that acts on it.
#include <string>
#include <vector>

#include "runtime/common/job_config.h"
#include "traces/model/step_window.h"
#include "traces/replay/what_if_edits.h"

namespace ddp {

enum class Mode { none, record, check, worker, export_trace, summary, analyze, digest, diff, what_if };

struct Command {
  Mode mode = Mode::none;
  JobConfig job;
  std::string out_dir;  // --out
  std::string
      input_dir;  // --export/--summary/--analyze/--what-if: the first input (a run folder, or a Kineto trace/folder)
  std::vector<std::string> inputs;        // --export/--summary/--analyze/--digest TRACES...: every input
  std::vector<std::string> maps;          // --map REGEX=STAGE: the user's names for Kineto stages (checked when parsed)
  int cycle = 0;                          // --cycle N: with Kineto traces, only profiling cycle N (1-based); 0 = all
  int diff_cycle = 0;                     // --diff A B --cycle N M: B's cycle (M; N when one is given)
  StepWindow steps;                       // --steps A-B: only these steps (--export, --summary, --analyze)
  std::vector<std::string> diff_dirs;     // --diff A B
  std::string what_if;                    // --what-if EDIT RUN...: the edits as the user wrote them
  std::vector<WhatIfEdit> what_if_edits;  // ... and as parsed, once (cli.cpp)
  std::string output_file;                // -o: --export's file or folder, --digest's folder
  std::string export_format = "chrome";   // --format: chrome (one merged trace) or kineto (a folder, one file per rank)
  bool json = false;
  std::vector<std::string> checks;  // --checks: subset of the ladder (default: all)
  bool job_options_given = false;
};

}  // namespace ddp
