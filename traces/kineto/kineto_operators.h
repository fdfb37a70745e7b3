#pragma once
// The profiler's operators in a rank's untracked main-thread time (docs/stalls.md, "Untracked time"). A rank whose
// main thread spends its time outside every stage span (host work between the batch and the forward: a copy, an
// augmentation on tensors, `loss.item()`) is "untracked main-thread time" to the analysis; PyTorch's profiler
// recorded the operators that took it. This reads one rank's Kineto trace and says which: each operator's own time
// (its children's left out, so a `record_function` around the work does not hide the operators inside it) on the
// thread that runs ProfilerStep#N, inside those steps and outside every span that is a stage (kineto_map.h). A
// DataLoader's `__next__` is a stage only up to its first operator (kineto_file.cpp): the work after it (rebuilding
// the batch, the whole Dataset with num_workers=0) is the main thread's and is named here.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_map.h"

namespace ddp {

struct KinetoOperatorTime {
  std::string name;
  int64_t untracked_ns = 0;  // its own time in the untracked time of the profiled steps
  uint32_t calls = 0;        // calls that took some of it
};

struct KinetoUntrackedOperators {
  uint32_t steps = 0;                         // ProfilerStep#N spans on the main thread
  int64_t untracked_ns = 0;                   // every operator's, summed
  std::vector<KinetoOperatorTime> operators;  // largest untracked_ns first
};

// Sees a trace's events as the Chrome reader hands them on (alone, or beside the importer's own reading: --digest
// keeps what it finds in the digest), then says what it found. Holds its own copy of the map (a map caches its
// answers and is not shared between threads).
namespace kineto_detail {
struct TimeInterval {
  int64_t t0 = 0, t1 = 0;
};
struct OperatorCall {
  int64_t t0 = 0, t1 = 0;
  uint32_t name = 0;  // index into the reader's names
};
// One thread's events: its steps, the spans that are stages, its operators.
struct ThreadOperators {
  std::vector<TimeInterval> steps, stages;
  std::vector<OperatorCall> ops;
};
}  // namespace kineto_detail

class UntrackedOperatorReader {
 public:
  explicit UntrackedOperatorReader(const KinetoStageMap& map) : map_(map) {}
  bool operator()(const ChromeEventView& e);
  KinetoUntrackedOperators finish();

 private:
  using ThreadKey = std::pair<std::string, std::string>;  // pid, tid
  kineto_detail::ThreadOperators& thread(const ChromeEventView& e);
  KinetoStageMap map_;
  std::map<ThreadKey, kineto_detail::ThreadOperators> threads_;
  std::pair<const ThreadKey, kineto_detail::ThreadOperators>* last_ = nullptr;  // std::map nodes do not move
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_ids_;
};

// Reads the trace at `path` (plain or .gz). False with `error` when it does not read; a trace without ProfilerStep
// spans reads with steps 0 and no operators.
bool kineto_untracked_operators(const std::string& path, const KinetoStageMap& map, KinetoUntrackedOperators& out,
                                std::string& error);

}  // namespace ddp
