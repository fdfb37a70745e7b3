#pragma once
// The replay's graph (replay.h), shared by its files: replay_graph.cpp builds it from a run, replay_ops.cpp makes a
// rank's ops a step at a time, replay_edits.cpp changes its plan, contention.cpp sets its waits for a core,
// replay_run.cpp runs it (replay.cpp the fit and the edited replay, replay_holdout.cpp the held-out halves).
//
// What the graph keeps is per step, bucket and batch, never per event: a rank's ops (one per main-thread span, and the
// time between them) are made from its RankData when a pass reads them, a step at a time (OpStream), and dropped once
// read. The run's RankData already holds those spans; a second copy of them per replay, kept for every rank through
// both replays and their plans, was most of --analyze's memory at 1024 ranks.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
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
  int64_t t0 = 0, t1 = 0;  // measured
  uint32_t step = 0;
  OpKind kind = OpKind::work;
  Stage stage = Stage::step;
  uint8_t micro = 0;
  bool other = false;  // untracked time between spans
  // Untracked time: the stage of the op before it, and whether that op was a step's end (replay_holdout.cpp keeps a
  // typical duration per such key: the time after backward is not the time after the optimizer).
  Stage after = Stage::step;
  bool after_step_end = false;
  // Its thread's time on a CPU and waiting for a core within it (traces/model/span_cpu.h), ns; -1 when its span
  // carried no split (untracked time, a profiler trace): the contention model leaves it as measured.
  int64_t cpu = -1, wait = -1;
  int64_t dur() const { return t1 - t0; }
  // wait_data: the batch's arrival, measured: the wait ended when it came.
  int64_t ready() const { return t1; }
};

// What an op's typical duration is kept under (replay_holdout.cpp): untracked or not, its stage (for untracked time,
// the op's before it), after a step's end (a step's end apart from its beginning: both are `step`).
using OpKey = std::tuple<bool, Stage, bool>;
inline OpKey key_of(const Op& o) {
  return o.other ? OpKey{true, o.after, o.after_step_end} : OpKey{false, o.stage, false};
}

struct Launch {
  uint64_t key = 0;    // bucket_key
  size_t op = 0;       // the op it fell in
  int64_t offset = 0;  // from that op's measured start
  int64_t done = 0;    // this rank's completion of the bucket, measured
  uint64_t bytes = 0;
  int64_t op_t0 = 0;  // that op's measured start (the launch's measured time is op_t0 + offset)
  uint64_t sync() const { return key >> 16; }
  int64_t at() const { return op_t0 + offset; }
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

// A measured op that takes a batch, and whether the rank fetched that batch itself (the op is then work).
struct Take {
  size_t op = 0;
  bool by_rank = false;
};

// One rank's chain: what its ops are made from (OpStream), its batches and its bucket launches.
struct Chain {
  const RankData* data = nullptr;                // the rank whose main-thread spans the ops are
  const std::vector<uint32_t>* steps = nullptr;  // the steps replayed
  int repeat = 1;                                // each step's micro-step made this many times (accumulate)
  bool micro_steps = false;                      // the run accumulates already (an op of micro-step > 0)
  std::vector<Take> takes;                       // the measured ops that take a batch, ascending
  std::vector<Batch> batches;                    // in consumption order (so by op, ascending)
  std::vector<Launch> launches;                  // per sync in the order its buckets ran
  int workers = 0;                               // worker lanes that made its batches
  int64_t slots = 1;                             // the queue's depth the run showed
};

// A rank's ops a step at a time: each step's (with the time between it and the step before) made from the rank's
// spans when asked, so no pass holds every op of a run.
class OpStream {
 public:
  explicit OpStream(const Chain& c) : c_(c) {}
  // Makes the next step's ops; false when the chain has none left.
  bool next();
  const std::vector<Op>& ops() const { return c_.repeat > 1 ? ops_ : measured_; }
  size_t first() const { return first_; }  // the chain's index of ops()[0]
  // The measured op that ops()[i] is, or repeats (accumulate).
  size_t source(size_t i) const { return c_.repeat > 1 ? sources_[i] : measured_first_ + i; }

 private:
  void make_measured(uint32_t step);
  void mark_takes();
  void repeat_micro_steps();
  bool takes_batch(size_t measured) const;

  const Chain& c_;
  size_t step_ = 0;              // the next of c_.steps to make
  int64_t cursor_ = INT64_MIN;   // the end of the last span made
  size_t take_ = 0;              // the next of c_.takes to mark
  size_t measured_first_ = 0;    // the measured chain's index of measured_[0]
  size_t first_ = 0;             // the chain's index of ops()[0]
  std::vector<Op> measured_;     // the step's ops as measured
  std::vector<Op> ops_;          // with repeat > 1: the step's ops with its micro-steps repeated
  std::vector<size_t> sources_;  //   and the measured op each is
};

// Every op of a chain at once, for a pass that looks ops up by time at random (op_at): one rank's, dropped after use.
std::vector<Op> all_ops(const Chain& c);

// The index of the batch op `op` takes in `c`, or -1.
int64_t batch_taken_at(const Chain& c, size_t op);

// A rank's main-thread stage (or its untracked time) set to the median rank's, step by step (stage_as_median): per
// step, the median rank's time in it and this rank's; each of its ops is scaled by their ratio.
struct StageScale {
  ReplayEdit edit;
  std::unordered_map<uint32_t, std::pair<double, double>> steps;  // step -> (median rank's ns, this rank's ns)
};

constexpr int64_t kAsMeasured = INT64_MIN;  // Plan::take_dur: no edit set the op's duration

// A host's wait for a core as the edits leave it (contention.h apply_contention): each span's wait, measured at
// stretch `measured`, as stretch `after` makes it.
struct Rewait {
  bool on = false;
  double measured = 0, after = 0;
};

// What the replay runs: per rank what the edits changed of its ops' durations (an op is otherwise as measured), the
// batches' fetches and their schedule, the launches and each one's own transfer time. First as measured, then changed
// by the edits.
struct Plan {
  std::vector<std::vector<StageScale>> scales;           // per rank: the stages an edit scaled, in the edits' order
  std::vector<std::vector<int64_t>> take_dur;            // per batch: its op's duration where an edit set it
  std::vector<std::vector<int64_t>> fetch;               // per batch
  std::vector<std::vector<int64_t>> prev, behind, idle;  // per batch: its worker's batch before, the queue, the idle
  std::vector<std::vector<int64_t>> origin;              // per batch: when it may start if no batch is before it
  std::vector<std::vector<uint8_t>> waits_for;           // per batch: its op waits for it (a worker fetched it)
  std::vector<std::vector<Launch>> launches;             // per rank, per sync in the order they run
  std::vector<std::vector<int64_t>> transfer;            // per launch: its own transfer time
  std::vector<Rewait> rewait;                            // per rank (empty: none): its waits for a core, contended
  // The held-out prediction (replay_holdout.cpp): every op that is work or a wait for data no batch explains takes its
  // key's typical duration on its rank (0 for a key the fit never saw), a wait for data being that work.
  bool typical_ops = false;
  std::vector<std::map<OpKey, int64_t>> typical;  // per rank
};

// Whether a stage_as_median edit sets op `o`: the main thread's work of the edit's stage (or its untracked time). With
// each batch's loader stages, what editable() (what_if_edits.h) promises has effect.
bool sets(const Op& o, const ReplayEdit& e);
// The duration plan `p` gives op `o` of rank `r`; `batch`: the batch it takes, -1 for none.
int64_t planned_dur(const Plan& p, size_t r, const Op& o, int64_t batch);
// Duration `d` of a span measured as `measured` (its CPU `cpu`, its wait for a core `wait`, -1: unknown) with its wait
// as `w` makes it (contention.cpp).
int64_t rewaited(const Rewait& w, int64_t cpu, int64_t wait, int64_t measured, int64_t d);

// A bucket's transfer as fixed cost + bytes x time per byte, least squares over every bucket of the run; all of one
// size (or no trend): the mean time per byte, no fixed cost.
struct CommModel {
  double fixed_ns = 0, ns_per_byte = 0;
};

// The chains of the steps in `common`, one per rank, with their batches and (per sync, in the order they ran) their
// bucket launches.
std::vector<Chain> build_chains(const std::vector<RankData>& data, const std::vector<uint32_t>& common);
// The op a moment falls in: a launch at a span's end is that span's, one inside a wait the work's before it.
size_t op_at(const std::vector<Op>& ops, int64_t t);
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
