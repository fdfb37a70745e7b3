// The replay's edits (replay.h): what each changes in the plan the replay runs.
#include <algorithm>
#include <climits>
#include <cmath>

#include "traces/base/stats.h"
#include "traces/replay/replay_graph.h"

namespace ddp::replay_graph {
namespace {

// A rank's stage as on the median rank (stats.h's lower_median: of two ranks, the faster): a loader stage per batch.
void loader_stage_as_median(Plan& p, const std::vector<Chain>& cs, const ReplayEdit& e) {
  const size_t R = static_cast<size_t>(e.rank);
  std::vector<std::unordered_map<uint64_t, int64_t>> spent(cs.size());
  for (size_t r = 0; r < cs.size(); ++r)
    for (const Batch& b : cs[r].batches) {
      auto it = b.stages.find(e.stage);
      spent[r][b.sync] = it == b.stages.end() ? 0 : it->second;
    }
  const Chain& c = cs[R];
  OpStream ops(c);  // a batch fetched on the main thread: its wait is the fetch, and shorter by the saving
  bool more = ops.next();
  for (size_t i = 0; i < c.batches.size(); ++i) {
    std::vector<double> per_rank;
    for (const auto& m : spent)
      per_rank.push_back(m.count(c.batches[i].sync) ? static_cast<double>(m.at(c.batches[i].sync)) : 0.0);
    const int64_t saving =
        std::max<int64_t>(0, spent[R][c.batches[i].sync] - static_cast<int64_t>(lower_median(per_rank)));
    p.fetch[R][i] -= saving;
    if (p.waits_for[R][i]) continue;
    while (more && c.batches[i].op >= ops.first() + ops.ops().size()) more = ops.next();
    if (!more) continue;  // cannot be: every batch's op is one of the chain's
    const Op& o = ops.ops()[c.batches[i].op - ops.first()];
    p.take_dur[R][i] = std::max<int64_t>(0, planned_dur(p, R, o, static_cast<int64_t>(i)) - saving);
  }
}

// Per step, every rank's time in the ops `e` sets (a main-thread stage, or the untracked time).
std::vector<std::unordered_map<uint32_t, double>> step_totals(const std::vector<Chain>& cs, const ReplayEdit& e) {
  std::vector<std::unordered_map<uint32_t, double>> totals(cs.size());
  for (size_t r = 0; r < cs.size(); ++r) {
    OpStream ops(cs[r]);
    while (ops.next())
      for (const Op& o : ops.ops())
        if (sets(o, e)) totals[r][o.step] += static_cast<double>(o.dur());
  }
  return totals;
}

// A rank's main-thread stage (or its untracked time) as on the median rank, per step: each of its ops in the stage
// scaled by the median rank's time in it over its own (Plan::scales). An op whose duration an edit set before (a
// batch's) takes the scaled one, as the edit that comes later.
void main_stage_as_median(Plan& p, const std::vector<Chain>& cs, const ReplayEdit& e) {
  const size_t R = static_cast<size_t>(e.rank);
  const std::vector<std::unordered_map<uint32_t, double>> totals = step_totals(cs, e);
  StageScale scale;
  scale.edit = e;
  for (const auto& [step, mine] : totals[R]) {
    std::vector<double> per_rank;
    for (const auto& t : totals) {
      auto it = t.find(step);
      per_rank.push_back(it == t.end() ? 0.0 : it->second);
    }
    scale.steps[step] = {lower_median(per_rank), mine};
  }
  OpStream ops(cs[R]);
  while (!cs[R].batches.empty() && ops.next())
    for (size_t j = 0; j < ops.ops().size(); ++j) {
      const Op& o = ops.ops()[j];
      const int64_t batch = batch_taken_at(cs[R], ops.first() + j);
      if (batch >= 0 && sets(o, e) && totals[R].at(o.step) > 0) p.take_dur[R][static_cast<size_t>(batch)] = kAsMeasured;
    }
  p.scales[R].push_back(std::move(scale));
}

// A rank's stage as on the median rank (stats.h's lower_median: of two ranks, the faster): a loader stage per batch, a
// main-thread stage (or the untracked time) per step.
void stage_as_median(Plan& p, const std::vector<Chain>& cs, const ReplayEdit& e) {
  if (e.rank < 0 || e.rank >= static_cast<int>(cs.size())) return;
  if (!e.other && stage_has(e.stage, kStageLoaderThread))
    loader_stage_as_median(p, cs, e);
  else
    main_stage_as_median(p, cs, e);
}

// `workers` (or as measured, -1) and `prefetch` (or as measured, -1): batch n on worker n mod workers, after the
// batch workers x prefetch before it was taken; workers=0: every rank fetches its batches itself.
void loader_schedule(Plan& p, const std::vector<Chain>& cs, int workers, int prefetch) {
  for (size_t r = 0; r < cs.size(); ++r) {
    const Chain& c = cs[r];
    const int64_t was = std::max(1, c.workers);
    const int64_t W = workers >= 0 ? workers : c.workers;
    const int64_t P = prefetch >= 1 ? prefetch : std::max<int64_t>(kReplayPrefetch, (c.slots + was - 1) / was);
    const int64_t slots = std::max<int64_t>(1, W) * P;
    for (size_t i = 0; i < c.batches.size(); ++i) {
      const Batch& b = c.batches[i];
      const int64_t n = static_cast<int64_t>(i);
      p.prev[r][i] = W > 0 && n >= W ? n - W : -1;
      p.behind[r][i] = n >= slots ? n - slots : -1;
      // The idle the run showed (start-up, scheduling), kept where the batch still follows another on its worker;
      // a worker's first batch starts with its pass.
      p.idle[r][i] = p.prev[r][i] >= 0 ? std::max<int64_t>(0, b.idle) : 0;
      p.waits_for[r][i] = W > 0;
      if (W == 0) p.take_dur[r][i] = p.fetch[r][i];
      p.origin[r][i] = INT64_MIN;  // only its pass holds it back
    }
  }
}

// Each bucket's transfer under a new transfer model: what the run's model says of it replaced by what the new one
// says, the rest of its measured time (its own variation) kept.
void retime(Plan& p, const CommModel& was, const CommModel& now) {
  for (size_t r = 0; r < p.launches.size(); ++r)
    for (size_t i = 0; i < p.launches[r].size(); ++i) {
      const double b = static_cast<double>(p.launches[r][i].bytes);
      const double t = static_cast<double>(p.transfer[r][i]) - was.fixed_ns - b * was.ns_per_byte + now.fixed_ns +
                       b * now.ns_per_byte;
      p.transfer[r][i] = std::max<int64_t>(0, std::llround(t));
    }
}

// The buckets re-cut at `cap` bytes: each sync's gradients get ready along its measured launches (linearly between
// them, from the start of the op of its first launch), a new bucket launches once its last byte is ready, and costs
// what the transfer model `m` says.
void rebucket(Plan& p, const std::vector<Chain>& cs, const CommModel& m, double cap) {
  for (size_t r = 0; r < cs.size(); ++r) {
    if (p.launches[r].empty()) continue;
    const std::vector<Op> ops = all_ops(cs[r]);  // one rank's, to place the new launches in
    std::vector<Launch> out;
    std::vector<int64_t> transfer;
    for (size_t a = 0; a < p.launches[r].size();) {
      size_t z = a;
      while (z < p.launches[r].size() && p.launches[r][z].sync() == p.launches[r][a].sync()) ++z;
      std::vector<std::pair<int64_t, double>> ready;  // (time, bytes ready by then)
      std::vector<const Launch*> sorted;
      for (size_t i = a; i < z; ++i) sorted.push_back(&p.launches[r][i]);
      std::sort(sorted.begin(), sorted.end(), [](const Launch* x, const Launch* y) { return x->at() < y->at(); });
      ready.push_back({sorted.front()->op_t0, 0.0});
      for (const Launch* l : sorted) ready.push_back({l->at(), ready.back().second + static_cast<double>(l->bytes)});
      const double total = ready.back().second;
      double cut = 0;
      for (uint16_t j = 0; cut < total; ++j) {
        const double from = cut;
        cut = std::min(total, cut + (j == 0 ? kDdpFirstBucketBytes : cap));
        size_t k = 1;
        while (k + 1 < ready.size() && ready[k].second < cut) ++k;
        const double span = ready[k].second - ready[k - 1].second;
        const double f = span > 0 ? (cut - ready[k - 1].second) / span : 1.0;
        const int64_t t =
            ready[k - 1].first + std::llround(f * static_cast<double>(ready[k].first - ready[k - 1].first));
        Launch l;
        l.key = (p.launches[r][a].sync() << 16) | j;
        l.op = op_at(ops, t);
        l.offset = std::clamp<int64_t>(t - ops[l.op].t0, 0, ops[l.op].dur());
        l.op_t0 = ops[l.op].t0;
        l.bytes = static_cast<uint64_t>(std::llround(cut - from));
        out.push_back(l);
        transfer.push_back(std::llround(m.fixed_ns + (cut - from) * m.ns_per_byte));
      }
      a = z;
    }
    p.launches[r] = std::move(out);
    p.transfer[r] = std::move(transfer);
  }
}

}  // namespace

std::string edit_plan(Plan& p, const std::vector<Chain>& cs, const std::vector<ReplayEdit>& es, const CommModel& model,
                      int ranks) {
  using K = ReplayEdit::Kind;
  int workers = -1, prefetch = -1;
  double bus = 0, cap = 0, to_ranks = 0, nodes = 0;
  for (const ReplayEdit& e : es) {
    if (e.kind == K::stage_as_median) stage_as_median(p, cs, e);
    if (e.kind == K::workers) workers = static_cast<int>(e.value);
    if (e.kind == K::prefetch) prefetch = static_cast<int>(e.value);
    if (e.kind == K::bandwidth) bus = e.value;
    if (e.kind == K::bucket_cap) cap = e.value;
    if (e.kind == K::ranks) to_ranks = e.value;
    if (e.kind == K::nodes) nodes = e.value;
  }
  if (workers >= 0 || prefetch >= 0) {
    bool any = false;
    for (const Chain& c : cs) any |= !c.batches.empty();
    if (!any)
      return "no batch of the run's loader was recorded (a trace without the data path): its workers cannot be "
             "replayed";
    loader_schedule(p, cs, workers, prefetch);
  }
  if (bus <= 0 && cap <= 0 && to_ranks <= 0 && nodes <= 0) return {};
  bool launches = false, bytes = true;
  for (const auto& ls : p.launches)
    for (const Launch& l : ls) launches = true, bytes &= l.bytes > 0;
  if (!launches || ranks < 2) return "the run recorded no bucket's allreduce between ranks: nothing to re-time";
  if (!bytes) return "the run's buckets carry no byte counts: their transfer cannot be re-timed by bytes";
  if (nodes > 1 && bus <= 0) return "nodes=M needs the link between the machines: bandwidth=X";
  // The ring's bus bandwidth: the run's, the one given, or across machines the slower of the run's and the link's.
  const double n0 = ranks, n = to_ranks > 0 ? to_ranks : n0;
  const double bus0 = model.ns_per_byte > 0 ? ring_factor(n0) * 1e9 / model.ns_per_byte : 0;
  const double bus1 = nodes > 1 ? std::min(bus0 > 0 ? bus0 : bus, bus) : bus > 0 ? bus : bus0;
  if (bus1 <= 0) return "the run's buckets show no time per byte to scale";
  const CommModel now{model.fixed_ns * (n - 1) / (n0 - 1), ring_factor(n) * 1e9 / bus1};
  if (cap > 0)
    rebucket(p, cs, now, cap);
  else
    retime(p, model, now);
  return {};
}

}  // namespace ddp::replay_graph
