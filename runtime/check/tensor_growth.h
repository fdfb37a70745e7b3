#pragma once
// Leaks as tensors (memory.steady on a user's script): what the companion's censuses of the live tensors say about
// one rank (python/ddp_profile/tensor_census.py; records.def tensor_census). A leak users make is tensors kept
// across steps: an autograd graph (a loss accumulated with it), outputs appended to a list, a cache keyed by the
// step. Their counts are exact, so the rule needs no noise marks: a count grows when it never falls from one census
// to the next after warm-up and rises between at least half of them (two at least), over kCensusMin censuses at
// least. A one-time rise is no growth: the seed job keeps its checkpoint's state after saving it (+5 tensors once).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/check/evidence.h"

namespace ddp {

// Censuses after warm-up needed to call a count growing: three show a trend two cannot.
inline constexpr size_t kCensusMin = 3;
// Detached tensors grow as a leak when they add one every ten steps at least: what grows once a pass (an epoch's
// loss kept for a history) is bounded by the epochs, not the steps. A graph kept alive is a leak at any rate.
inline constexpr double kTensorsPerStep = 0.1;

struct TensorGrowth {
  size_t censuses = 0;         // after warm-up
  bool graph_grows = false;    // the autograd nodes live tensors reach
  bool tensors_grow = false;   // the live tensors
  bool across_epochs = false;  // the growing count went on from one loader pass into the next
  int64_t from_step = 0, to_step = 0;
  int64_t from_epoch = 0;
  records::tensor_census first, last;  // the censuses at from_step and to_step
  std::string holder_kind;             // what grows: "graph", "list", "dict", "deque", "set"; "" when none is seen
  std::string holder_name;             // where it is held; "" when not found
  int64_t holder_from = 0, holder_to = 0;
  bool grows() const { return graph_grows || tensors_grow; }
};

// One rank's steps (censuses among them), the steps before `warm` left out.
TensorGrowth tensor_growth(const std::vector<TrainingStep>& steps, int64_t warm);

}  // namespace ddp
