#pragma once
// The replay's graph (replay.h), shared by its three files: replay_graph.cpp builds it from a run, replay_edits.cpp
// changes its plan, replay.cpp runs it.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "traces/rank_data/loader_fetch.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/replay.h"

namespace ddp::replay_graph {

using namespace rank_data;  // the replay reads the ranks as traces/rank_data prepared them

// DDP's first bucket (the last layers' gradients) holds at most 1 MB whatever bucket_cap_mb says
// (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES): it starts the first allreduce early.
constexpr double kDdpFirstBucketBytes = 1 << 20;

enum class OpKind : uint8_t { work, wait_data, wait_comm, step_begin, step_end };

struct Op {
  OpKind kind = OpKind::work;
  Stage stage = Stage::step;
  bool other = false;  // untracked time between spans
  uint32_t step = 0;
  uint8_t micro = 0;
  int64_t t0 = 0, t1 = 0;  // measured
  int64_t ready = 0;       // wait_data: the batch's arrival, measured
  // Its thread's time on a CPU and waiting for a core within it (traces/model/span_cpu.h), ns; -1 when its span
  // carried no split (untracked time, a profiler trace): the contention model leaves it as measured.
  int64_t cpu = -1, wait = -1;
  int64_t dur() const { return t1 - t0; }
};

struct Launch {
  uint64_t key = 0;    // bucket_key
  size_t op = 0;       // the op it fell in
  int64_t offset = 0;  // from that op's measured start
  int64_t done = 0;    // this rank's completion of the bucket, measured
  uint64_t bytes = 0;
  uint64_t sync() const { return key >> 16; }
};

// One batch a rank consumed, as its loader made it (rank_data::Fetch: its fetch as measured; see replay.h for the
// schedule).
struct Batch : rank_data::Fetch {
  uint64_t sync = 0;        // sync_key(step, micro) of the step that consumed it
  bool on_main = false;     // fetched by the rank itself (num_workers=0): its wait is that work
  int64_t pass_start = 0;   // the earliest fetch of its pass: no batch of a pass starts before its pass does
  bool opens_pass = false;  // the first of its pass the rank took: its pass began `pass_lead` after its wait
  int64_t pass_lead = 0;    //   began (the pass starts when the rank asks for it, and moves with the rank)
  int64_t idle = 0;         // measured start minus what allowed it
  int64_t handoff = 0;      // the wait's measured end minus the later of the fetch's end and the wait's start
  int64_t prev = -1;        // the worker's batch before it (index), -1: none analysed
  int64_t behind = -1;      // the batch `slots` before it in consumption order, -1: none analysed
  size_t op = 0;            // the wait op that takes it
};

// A batch's time on its lane, all stages.
inline int64_t spent(const Batch& b) { return b.spent(); }

struct Chain {
  std::vector<Op> ops;
  std::vector<Batch> batches;                      // in consumption order
  std::unordered_map<size_t, size_t> batch_of_op;  // wait_data op -> batch
  std::vector<Launch> launches;                    // per sync in the order its buckets ran
  int workers = 0;                                 // worker lanes that made its batches
  int64_t slots = 1;                               // the queue's depth the run showed
};

// What the replay runs: per rank the ops' durations, the batches' fetches and their schedule, the launches and each
// one's own transfer time. First as measured, then changed by the edits.
struct Plan {
  std::vector<std::vector<int64_t>> dur;                 // per op
  std::vector<std::vector<int64_t>> fetch;               // per batch
  std::vector<std::vector<int64_t>> prev, behind, idle;  // per batch: its worker's batch before, the queue, the idle
  std::vector<std::vector<int64_t>> origin;              // per batch: when it may start if no batch is before it
  std::vector<std::vector<uint8_t>> waits_for;           // per batch: its op waits for it (a worker fetched it)
  std::vector<std::vector<Launch>> launches;             // per rank, per sync in the order they run
  std::vector<std::vector<int64_t>> transfer;            // per launch: its own transfer time
};

// A bucket's transfer as fixed cost + bytes x time per byte, least squares over every bucket of the run; all of one
// size (or no trend): the mean time per byte, no fixed cost.
struct CommModel {
  double fixed_ns = 0, ns_per_byte = 0;
};

// The chains of the steps in `common`, one per rank, with their batches and (per sync, in the order they ran) their
// bucket launches.
std::vector<Chain> build_chains(const std::vector<RankData>& data, const std::vector<uint32_t>& common);
// The op a moment falls in: a launch at a span's end is that span's, one inside a wait the work's before it.
size_t op_at(const Chain& c, int64_t t);
// Each step's micro-step run `k` times: the ops from the step's start to its last backward repeated k - 1 times
// before it (DDP's no_sync: no bucket launched), each repeat taking a batch as the measured one did (the batches dealt
// to the workers again); the collective, the optimizer and the rest of the step once. "" or why the run cannot.
std::string accumulate(std::vector<Chain>& cs, int k);
// A ring allreduce's bytes on each link for a bucket of one byte: 2(n-1)/n (nccl-tests' bus bandwidth factor).
inline double ring_factor(double n) { return n > 1 ? 2 * (n - 1) / n : 0; }
Plan measured_plan(const std::vector<Chain>& cs);
CommModel fit_comm(const Plan& p);
// The edits applied to the measured plan; "" or why this run cannot take them.
// `ranks`: the measured run's.
std::string edit_plan(Plan& p, const std::vector<Chain>& cs, const std::vector<ReplayEdit>& es, const CommModel& model,
                      int ranks);

}  // namespace ddp::replay_graph
