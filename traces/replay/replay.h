#pragma once
// What if: the run's steps replayed from their measured pieces, and replayed again with some pieces changed.
//
// Each rank's analysed steps become one chain of ops that covers its main thread without a gap: every top-level
// main-lane span is an op (its measured duration), the time between spans is an op of its own ("other"), and the
// waits are not durations but conditions.
// - wait_comm ends when every bucket of its sync is done. The buckets of a sync run one after another (Gloo and NCCL
//   both): a bucket starts when every rank has launched it and the bucket before it is done, and then takes its own
//   transfer time (measured: its done minus that start). A launch is replayed where it fell in its op (the op
//   scaled, the launch moves with it).
// - A wait for a batch the rank's loader made (its fetch indexed on a worker lane) ends its measured hand-over after
//   both the rank reached it and the batch's fetch ended. The fetches are replayed too: a worker's batches run one
//   after another (batch n on worker n mod workers), each no earlier than the batch `slots` before it was taken (the
//   bounded queue, at least workers x prefetch deep, deeper when the run showed it), after the idle the run showed
//   beyond both (scheduling, worker start-up).
// - Any other wait for data that held the rank (longer than kReplayStallNs) ends when it ended; a shorter one is a
//   hand-over that costs its duration. The ranks advance in lock step: a rank blocked at a wait_comm waits for the
//   others to reach theirs.
//
// Replayed as measured, the chains give back the measured steps (by construction, up to clamping): the per-step
// error (mean and p90 of |replayed - measured| / measured step time, averaged over ranks) says whether the graph is
// built right, not whether the model predicts. What says that is the held-out validation (replay_holdout.h): the
// model's parameters fitted on half of the steps, the other half predicted from them.
//
// CPU contention between the ranks and their workers on one host, when the run recorded its spans' CPU splits and
// each rank's cores (traces/replay/contention.h): an edit that frees CPU shortens every span's wait for a core, one
// that adds work lengthens it, and no step is predicted shorter than the host's CPU work over its cores.
//
// What it leaves out: memory bandwidth, the allocator; buckets are cut at exact byte counts (DDP cuts them at
// parameter boundaries).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "traces/model/rank_trace.h"
#include "traces/model/run_trace.h"
#include "traces/rank_data/rank_data.h"
#include "traces/replay/replay_thresholds.h"
#include "traces/replay/what_if_edits.h"

namespace ddp {

// Ranks (their places among the replay's `data`) that share one host's cores (contention.h host_cores).
struct HostCores {
  std::string host;
  std::vector<int> ranks;
  double cores = 0;  // what they could use: their affinities' union, a cgroup's limit, the host's online cores
};

// The replay checked on steps it did not fit (replay_holdout.h): its parameters fitted on one half of the analysed
// steps, the other half replayed from them alone and compared with its measured steps; each half in turn.
struct ReplayHoldout {
  bool ok = false;        // false: too few steps to hold half of them out (then `reason`)
  std::string reason;     // why not ok
  size_t steps = 0;       // the steps predicted (every analysed step once)
  double error_mean = 0;  // |predicted - measured| / measured step, per step, mean
  double error_p90 = 0;   //   and 90th percentile (covering_percentile)
  // |predicted - measured| / measured mean step of a half, the larger of the two halves: what a prediction (a mean
  // step) is held to, and what the trust rule reads. A step's own ups and downs (a slow collective now and then, a
  // worker's batch late every other step) weigh on the per-step error and average out of the mean step.
  double mean_step_error = 0;
};

struct ReplayResult {
  double step_ms = 0;      // mean over the steps of the mean over ranks of the replayed step
  double measured_ms = 0;  // the same, measured
  double fit_ms = 0;       // the same, replayed as measured
  // The fit: |replayed - measured| / measured, per step, of the unedited replay (every measured piece and leftover
  // kept): a check that the graph is built right, not of the model (holdout is).
  double error_mean = 0;  // mean
  double error_p90 = 0;   //   and 90th percentile
  ReplayHoldout holdout;  // set by the caller with replay_holdout() (replay() does not): what the trust rule reads
  // Replayed ms a step per stage name ("other": untracked time), mean over ranks; of the edited replay, and the fit.
  std::map<std::string, double> stage_ms, fit_stage_ms;
  // The transfer model the collective's edits use, fitted on every bucket: a fixed cost plus the bytes a ring moves
  // (2(n-1)/n of the bucket) at the bus bandwidth, as nccl-tests reports it.
  double comm_fixed_ms = 0, comm_bus_bytes_per_s = 0;
  bool ok = false;    // false: nothing to replay, or an edit this run cannot take (then `error`)
  std::string error;  // why not ok
  // With ok: what the fit passed as measured instead of by the model (a wait for a collective some rank never reached,
  // in a trace cut short). Each note makes the fit untrusted (replay_trust.h): it gives those steps back by fiat.
  std::vector<std::string> notes;
  // With contention (hosts given): each host's stretch (waits for a core per unit of CPU) as measured and as the
  // edits leave it; and, when an edit asks more than the cores give, what bounds the step ("" when none does).
  std::vector<double> stretch_measured, stretch_after;
  std::string saturated;
  // With keep_trace: the predicted run, one trace per rank on rank 0's clock: its main-thread ops as spans of their
  // stages, each step, each bucket's allreduce (launch to done) on "comm", each batch's fetch on its worker's lane
  // (its measured stages in order, scaled to the predicted fetch).
  std::vector<RankTrace> predicted;
};

// `e` as the replay takes it: a stage edit's rank number made that rank's place among `data` (the run's traces, in the
// run's order, which may be a subset of the ranks); nullopt when the run has no such rank. Other edits name no rank.
std::optional<ReplayEdit> edit_for_traces(const ReplayEdit& e, const std::vector<rank_data::RankData>& data);

namespace replay_graph {
struct Timeline;
class PredictedRun;
}  // namespace replay_graph

// A run made ready for replays of the steps in `common` (every rank has them): its chains, the plan as measured, the
// hosts' load as measured and the replay as measured (the fit), made once for every edit replayed on it (--analyze
// replays each top cause's, the cores' and a burst's). `data`, `common` and `hosts` must outlive it.
// `hosts`: the cores the ranks share (contention.h host_cores); empty, every span's wait for a core stays as measured.
class RunReplay {
 public:
  RunReplay(const std::vector<rank_data::RankData>& data, const std::vector<uint32_t>& common,
            const std::vector<HostCores>& hosts = {});
  ~RunReplay();
  RunReplay(const RunReplay&) = delete;
  RunReplay& operator=(const RunReplay&) = delete;
  // The run replayed as measured, or with `edits` (its error fields are then the fit's).
  ReplayResult replay(const std::vector<ReplayEdit>& edits = {}, bool keep_trace = false) const;

 private:
  struct Prepared;
  std::string edited(const std::vector<ReplayEdit>& edits, replay_graph::PredictedRun* predicted,
                     replay_graph::Timeline& out, ReplayResult& res, double& bound_ns) const;
  std::unique_ptr<Prepared> run_;
};

// One replay of the steps in `common`: RunReplay(data, common, hosts).replay(edits, keep_trace).
ReplayResult replay(const std::vector<rank_data::RankData>& data, const std::vector<uint32_t>& common,
                    const std::vector<ReplayEdit>& edits = {}, bool keep_trace = false,
                    const std::vector<HostCores>& hosts = {});

}  // namespace ddp
