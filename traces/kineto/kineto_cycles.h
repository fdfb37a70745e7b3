#pragma once
// Profiling cycles: torch.profiler.schedule repeats (repeat=0 is its default) and tensorboard_trace_handler writes
// one file per cycle and rank (rank0.<time_ns>.pt.trace.json, ...). The files of one rank are its cycles in time
// order; each is paired with the reference rank's cycle it overlaps in time. A rank's cycles become one trace (the
// steps are the ProfilerStep ids the files carry, so the gaps between cycles are no step's time).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/kineto/kineto_file.h"

namespace ddp::kineto_detail {

// Groups the readable files (rank known) by rank and cycle. `cycle` > 0 keeps only that cycle (1-based). On return
// `files` holds one file per rank (its cycles merged) plus the damaged and rank-less ones as they were; `report` is
// [{"cycle", "steps", "files"}], `summary` a line like "4 files: 2 cycles x 2 ranks, steps 2-9 and 12-19" (empty for
// one cycle). False with `error` naming the files when cycles do not pair (files of different jobs).
bool group_cycles(std::vector<KFile>& files, int cycle, nlohmann::json& report, std::string& summary,
                  std::string& error);

}  // namespace ddp::kineto_detail
