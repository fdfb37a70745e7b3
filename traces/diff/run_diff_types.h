#pragma once
// What the run diff compares and finds (traces/diff/run_diff.h computes it): a run as the diff reads it, the options,
// and each part of the result. The diff's steps include this, not the entry points.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/analysis/summary.h"
#include "traces/model/manifest.h"

namespace ddp {

// One line of verify/rank<R>.summaries.jsonl.
struct TensorRecord {
  int64_t step = 0;
  std::string kind;  // "param" (before the step's update), "activation", "grad" (after sync)
  int micro = -1;    // micro-step of an activation; -1 when the line has none
  std::string name;
  nlohmann::json stats;  // count, mean, std, min, max, l2, hash (a non-finite value is stored as null)
};

// One line of verify/rank<R>.replicas.jsonl: the parameter hash after optimizer step `step` (-1: after broadcast).
struct ReplicaRecord {
  int64_t step = 0;
  std::string hash;
};

// What --diff reads from one run folder.
struct DiffRun {
  std::string dir;
  std::optional<Manifest> manifest;  // read once; absent when missing or unreadable (`problems`)
  // What the configuration comparison compares: the manifest as written (null without one); of profiler traces
  // their source, world size, backend, steps and cycle.
  nlohmann::json compared;
  bool has_traces = false;                             // at least one rank trace could be read
  std::vector<RankSummary> traces;                     // summarize() of the rank traces
  std::map<int, std::vector<TensorRecord>> summaries;  // by rank, in file order
  std::map<int, std::vector<ReplicaRecord>> replicas;  // by rank, in file order
  std::vector<std::string> problems;                   // damaged or missing pieces, one line each
};

struct DiffOptions {
  // A tensor diverges when its element count differs, when one side's statistic is not finite and the other's is,
  // or when |a - b| / scale > rtol for mean, std or l2. scale = max(|a|, |b|) for std and l2; for the mean it is
  // also at least the tensor's RMS (l2 / sqrt(count)), so a mean near zero does not turn rounding into divergence.
  // Identical hashes are identical, whatever the numbers say.
  double rtol = 1e-4;
};

// The distributed variables whose simultaneous change makes a diff ambiguous, with the manifest keys (flattened,
// dot-separated) that carry each one.
struct DistributedVariable {
  const char* name;
  std::vector<const char*> keys;
};
const std::vector<DistributedVariable>& distributed_variables();

struct ConfigDifference {
  std::string key;       // flattened manifest key, e.g. "config.batch_size", "world_size", "versions.libtorch"
  nlohmann::json a, b;   // null when the key is absent on that side
  std::string variable;  // the distributed variable this key belongs to, or empty
};

struct Delta {
  std::optional<double> a, b;  // absent when that run has no value
};

struct StageRow {
  std::string stage;
  Delta per_step_ms;  // total time in the stage divided by the run's step count
};

struct TimingBlock {
  Delta step_median_ms;
  Delta steps;
  std::vector<StageRow> stages;  // stages with spans in either run, in stage order
};

struct TimingDiff {
  std::string source;  // "traces" (both runs have traces), "manifest" (step medians only) or "none"
  std::string note;    // why stage rows are missing, if they are
  TimingBlock mean;    // averaged over each run's ranks
  std::map<int, TimingBlock> ranks;
};

struct TensorDivergence {
  int rank = 0;
  int64_t step = 0;
  std::string kind;
  int micro = -1;
  std::string name;
  std::string reason;   // "count", "not finite", "mean", "std", "l2" (the statistics beyond tolerance, comma-joined)
  nlohmann::json a, b;  // the two stats objects
  double rel_mean = 0, rel_std = 0, rel_l2 = 0;
  std::string hint;  // the likely cause, from where the divergence starts (a heuristic, worded as one)
};

struct RankTensorDiff {
  int rank = 0;
  size_t compared = 0;          // records present in both runs
  size_t identical = 0;         // same hash
  size_t within_tolerance = 0;  // different hash, statistics within rtol
  size_t diverged = 0;
  size_t only_a = 0, only_b = 0;  // records present in one run only (other steps, micro-steps or layers)
  std::optional<TensorDivergence> first_divergence;
  std::optional<TensorDivergence> first_hash_difference;  // the first record that is not bitwise identical
};

struct TensorDiff {
  bool compared = false;
  std::string note;  // why not compared
  double rtol = 0;
  std::vector<RankTensorDiff> ranks;
  std::optional<TensorDivergence> first;  // earliest over ranks (step, then record order)
};

struct ReplicaDifference {
  int rank = 0;
  size_t compared = 0;
  std::optional<int64_t> first_step;  // first step (in order) whose hash differs
  std::string hash_a, hash_b;
};

struct ReplicaDiff {
  bool compared = false;
  std::string note;
  std::vector<ReplicaDifference> ranks;
  std::optional<int64_t> first_step;  // earliest over ranks
};

struct RunDiff {
  std::string dir_a, dir_b;
  std::vector<std::string> problems_a, problems_b;
  std::vector<ConfigDifference> config;
  std::vector<std::string> distributed_changed;  // names of the distributed variables that changed
  std::string warning;                           // set when more than one distributed variable changed
  TimingDiff timing;
  TensorDiff tensors;
  ReplicaDiff replicas;
};

}  // namespace ddp
