// The replay's run (replay.h): the chains run in lock step at the collectives, each rank a step of ops at a time.
#include "traces/replay/replay_run.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_map>

namespace ddp::replay_graph {
namespace {

// Where one rank's replay is: the op it is at, in the step its OpStream made last; the next of its batches and of its
// launches (by op) that an op may take.
struct RankCursor {
  explicit RankCursor(const Chain& c) : ops(c) { left = ops.next(); }
  OpStream ops;
  size_t at = 0;      // into ops.ops()
  bool left = false;  // an op is left
  size_t batch = 0;   // the first batch whose op is not behind
  size_t launch = 0;  // the first of Replayer::by_op_'s launches whose op is not behind
  size_t last = 0;    // the first of Replayer::last_launches_ whose op is not behind
  size_t index() const { return ops.first() + at; }
  const Op& op() const { return ops.ops()[at]; }
  void pass() {
    if (++at < ops.ops().size()) return;
    at = 0;
    left = ops.next();
  }
};

// One run of the chains: each rank runs its ops until a wait for a collective that a rank has not launched yet, the
// ranks in turn, until none is left (replay.h says what each op waits for).
class Replayer {
 public:
  Replayer(const std::vector<Chain>& chains, const Plan& p, PredictedRun* predicted);
  Timeline run();

 private:
  void index_launches();
  int64_t batch_at(size_t r, size_t op);
  int64_t fetch_end(size_t r, size_t bi);
  void launched(size_t r, const Op& o, size_t op, int64_t begin, int64_t dur);
  bool sync_ready(uint64_t sync) const;
  void pass(size_t r);
  int64_t comm_done(size_t r, uint64_t sync);
  void advance(size_t r);
  void force_one();

  const std::vector<Chain>& chains_;
  const Plan& plan_;
  PredictedRun* predicted_;
  const size_t ranks_;
  Timeline tl_;
  std::vector<RankCursor> cursors_;         // per rank: where it is
  std::vector<int64_t> t_;                  // per rank: its replayed time
  std::vector<std::vector<size_t>> by_op_;  // per rank: its launches in the order of their ops
  std::vector<std::unordered_map<uint64_t, std::vector<size_t>>> of_sync_;  // sync -> its launches, in order
  // Per rank: the op of its latest launch in each sync, (op, sync) by op; per sync: the ranks not past that op yet.
  // A sync is ready once every rank launched all of its buckets: counted as the ranks pass those ops, not asked of
  // every rank at every wait (at 1024 ranks that scan was most of the run).
  std::vector<std::vector<std::pair<size_t, uint64_t>>> last_launches_;
  std::unordered_map<uint64_t, size_t> unlaunched_;
  // Per bucket: the latest replayed launch over the ranks so far.
  std::unordered_map<uint64_t, int64_t> replayed_latest_;
  std::vector<std::vector<int64_t>> fetched_, taken_;  // per batch: replayed fetch end, replayed take
  std::vector<int64_t> pass_began_;                    // per rank: when the pass of the batch it takes next began
  std::vector<uint8_t> in_step_;                       // per rank: inside a step (its time counts per stage)
};

Replayer::Replayer(const std::vector<Chain>& chains, const Plan& p, PredictedRun* predicted)
    : chains_(chains), plan_(p), predicted_(predicted), ranks_(chains.size()) {
  tl_.steps.resize(ranks_);
  tl_.fetches.resize(ranks_), tl_.buckets.resize(ranks_);
  cursors_.reserve(ranks_);
  t_.assign(ranks_, 0);
  fetched_.resize(ranks_), taken_.resize(ranks_);
  for (size_t r = 0; r < ranks_; ++r) {
    cursors_.emplace_back(chains[r]);
    if (cursors_[r].left) t_[r] = cursors_[r].op().t0;
    tl_.fetches[r].resize(chains[r].batches.size());
    tl_.buckets[r].resize(p.launches[r].size());
    fetched_[r].assign(chains[r].batches.size(), 0);
    taken_[r].assign(chains[r].batches.size(), 0);
  }
  pass_began_.assign(ranks_, INT64_MIN);
  in_step_.assign(ranks_, 0);
  index_launches();
}

void Replayer::index_launches() {
  by_op_.resize(ranks_);
  of_sync_.resize(ranks_);
  last_launches_.resize(ranks_);
  for (size_t r = 0; r < ranks_; ++r) {
    std::unordered_map<uint64_t, size_t> latest;
    for (size_t li = 0; li < plan_.launches[r].size(); ++li) {
      const Launch& l = plan_.launches[r][li];
      by_op_[r].push_back(li);
      of_sync_[r][l.sync()].push_back(li);
      auto [it, fresh] = latest.emplace(l.sync(), l.op);
      if (!fresh) it->second = std::max(it->second, l.op);
    }
    const std::vector<Launch>& ls = plan_.launches[r];
    std::stable_sort(by_op_[r].begin(), by_op_[r].end(), [&](size_t a, size_t b) { return ls[a].op < ls[b].op; });
    for (const auto& [sync, op] : latest) {
      last_launches_[r].push_back({op, sync});
      ++unlaunched_[sync];
    }
    std::sort(last_launches_[r].begin(), last_launches_[r].end());
  }
}

// The batch op `op` of rank `r` takes, or -1; the ops come in order, so the batches are passed once.
int64_t Replayer::batch_at(size_t r, size_t op) {
  const std::vector<Batch>& bs = chains_[r].batches;
  size_t& b = cursors_[r].batch;
  while (b < bs.size() && bs[b].op < op) ++b;
  return b < bs.size() && bs[b].op == op ? static_cast<int64_t>(b) : -1;
}

int64_t Replayer::fetch_end(size_t r, size_t bi) {
  const Batch& b = chains_[r].batches[bi];
  if (b.opens_pass) pass_began_[r] = t_[r] + b.pass_lead;  // t: the replayed start of the batch's wait
  const int64_t prev = plan_.prev[r][bi], behind = plan_.behind[r][bi];
  int64_t allowed = std::max(prev >= 0 ? fetched_[r][static_cast<size_t>(prev)] : plan_.origin[r][bi], pass_began_[r]);
  if (behind >= 0) allowed = std::max(allowed, taken_[r][static_cast<size_t>(behind)]);
  tl_.fetches[r][bi] = {allowed + plan_.idle[r][bi], allowed + plan_.idle[r][bi] + plan_.fetch[r][bi]};
  return fetched_[r][bi] = tl_.fetches[r][bi].second;
}

// The launches in op `op` of rank `r`, each where it fell in the op (the op scaled to `dur` and started at `begin`).
void Replayer::launched(size_t r, const Op& o, size_t op, int64_t begin, int64_t dur) {
  const double scale = o.dur() > 0 ? static_cast<double>(dur) / static_cast<double>(o.dur()) : 1.0;
  const std::vector<size_t>& ls = by_op_[r];
  size_t& next = cursors_[r].launch;
  while (next < ls.size() && plan_.launches[r][ls[next]].op < op)
    ++next;  // in an op passed as measured: never launched
  for (; next < ls.size() && plan_.launches[r][ls[next]].op == op; ++next) {
    const Launch& l = plan_.launches[r][ls[next]];
    const int64_t at = begin + static_cast<int64_t>(std::llround(static_cast<double>(l.offset) * scale));
    auto [it, fresh] = replayed_latest_.emplace(l.key, at);
    if (!fresh) it->second = std::max(it->second, at);
    tl_.buckets[r][ls[next]].first = at;
  }
}

bool Replayer::sync_ready(uint64_t sync) const {
  auto it = unlaunched_.find(sync);
  return it == unlaunched_.end() || it->second == 0;
}

// Rank `r` passes its op: each sync whose last launch on this rank was in an op now behind it has one rank fewer to
// wait for (a rank with no op left has passed them all).
void Replayer::pass(size_t r) {
  RankCursor& c = cursors_[r];
  c.pass();
  const size_t at = c.left ? c.index() : SIZE_MAX;
  const std::vector<std::pair<size_t, uint64_t>>& ls = last_launches_[r];
  for (; c.last < ls.size() && ls[c.last].first < at; ++c.last) --unlaunched_[ls[c.last].second];
}

// The sync's buckets one after another, each once every rank launched it and the one before is done.
int64_t Replayer::comm_done(size_t r, uint64_t sync) {
  int64_t done = INT64_MIN;
  auto it = of_sync_[r].find(sync);
  if (it == of_sync_[r].end()) return done;
  for (size_t li : it->second) {
    done = std::max(replayed_latest_[plan_.launches[r][li].key], done) + plan_.transfer[r][li];
    tl_.buckets[r][li].second = done;
  }
  return done;
}

// Rank `r` runs its op: work takes its planned time, a wait lasts until what it waits for.
void Replayer::advance(size_t r) {
  const Op& o = cursors_[r].op();
  const size_t i = cursors_[r].index();
  const int64_t before = t_[r];
  const int64_t batch = batch_at(r, i);
  const int64_t dur = planned_dur(plan_, r, o, batch);
  if (batch >= 0 && plan_.waits_for[r][static_cast<size_t>(batch)]) {
    const size_t bi = static_cast<size_t>(batch);
    t_[r] = std::max(t_[r], fetch_end(r, bi)) + chains_[r].batches[bi].handoff;
  } else if (batch >= 0) {  // the rank fetched it itself: the op is that work
    fetch_end(r, static_cast<size_t>(batch));
    t_[r] += dur;
  } else {
    switch (o.kind) {
      case OpKind::work:
        t_[r] += dur;
        break;
      case OpKind::wait_data:  // the held-out prediction keeps no measured end: the wait is its typical work
        t_[r] = plan_.typical_ops ? t_[r] + dur : std::max(t_[r], o.ready());
        break;
      case OpKind::wait_comm:
        t_[r] = std::max(t_[r], comm_done(r, sync_key(o.step, o.micro)));
        break;
      case OpKind::step_begin:
        tl_.steps[r][o.step].first = t_[r];
        in_step_[r] = 1;
        break;
      case OpKind::step_end:
        tl_.steps[r][o.step].second = t_[r];
        in_step_[r] = 0;
        break;
    }
  }
  if (batch >= 0) taken_[r][static_cast<size_t>(batch)] = t_[r];
  if (in_step_[r]) tl_.stage_ns[o.other ? 256 : static_cast<size_t>(o.stage)] += static_cast<double>(t_[r] - before);
  if (predicted_) predicted_->op(r, o, before, t_[r]);
  launched(r, o, i, before, dur);
  pass(r);
}

// Every rank waits on a sync another never reaches (a trace cut short): the first blocked wait passes as measured, so
// the replay ends instead of spinning.
void Replayer::force_one() {
  for (size_t r = 0; r < ranks_; ++r)
    if (cursors_[r].left) {
      const Op& o = cursors_[r].op();
      const int64_t before = t_[r];
      t_[r] += o.dur();
      if (predicted_) predicted_->op(r, o, before, t_[r]);
      ++tl_.forced;
      pass(r);
      return;
    }
}

Timeline Replayer::run() {
  bool left = true;
  while (left) {
    left = false;
    bool moved = false;
    for (size_t r = 0; r < ranks_; ++r) {
      while (cursors_[r].left) {
        const Op& o = cursors_[r].op();
        if (o.kind == OpKind::wait_comm && !sync_ready(sync_key(o.step, o.micro))) break;
        advance(r);
        moved = true;
      }
      left |= cursors_[r].left;
    }
    if (left && !moved) force_one();
  }
  return std::move(tl_);
}

}  // namespace

Timeline run_chains(const std::vector<Chain>& chains, const Plan& p, PredictedRun* predicted) {
  return Replayer(chains, p, predicted).run();
}

}  // namespace ddp::replay_graph
