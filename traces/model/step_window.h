#pragma once
// `--steps A-B`: a window of optimizer steps that --export, --summary, --analyze and the viewer keep, so that a
// gigabyte trace can be looked at a few steps at a time (and a merged export fits what Perfetto UI can open).
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "traces/model/run_trace.h"

namespace ddp {

struct StepWindow {
  uint32_t first = 0;
  uint32_t last = std::numeric_limits<uint32_t>::max();
  bool everything() const { return first == 0 && last == std::numeric_limits<uint32_t>::max(); }
  bool holds(uint32_t step) const { return first <= step && step <= last; }
};

// "A-B" (both included) or "A" (one step). False with `error` saying what is wrong.
bool parse_step_window(std::string_view text, StepWindow& out, std::string& error);

// Keeps only the spans of the window's steps on every rank, and the counter samples inside the time they cover; the
// run records the steps kept (RunTrace::step_window, "step_window": [first, last] in its exported manifest). False with
// `error` naming the steps the run holds when none is inside the window (then the run is left as it was).
bool keep_steps(RunTrace& run, const StepWindow& window, std::string& error);

// The first steps of [first, last] whose share of `bytes` stays within `limit`, steps taken as equal in size, with
// a tenth to spare (what --export suggests when its output is too big for Perfetto UI). At least one step.
StepWindow steps_within(uint32_t first, uint32_t last, uint64_t bytes, uint64_t limit);

// The first and last step of any rank's step spans; false when there are none.
bool step_range(const RunTrace& run, uint32_t& first, uint32_t& last);

}  // namespace ddp
