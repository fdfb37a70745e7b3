// The replay's graph from a run: per rank the batches its loader made and the bucket launches (found in its ops, made
// and dropped on the way); and the plan as measured.
#include "traces/replay/replay_graph.h"

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>

namespace ddp::replay_graph {

// The op a moment falls in: a launch at a span's end (the last bucket, as backward ends) is that span's, and one
// inside a wait belongs to the work before it (a wait launches nothing).
size_t op_at(const std::vector<Op>& ops, int64_t t) {
  auto it = std::lower_bound(ops.begin(), ops.end(), t, [](const Op& o, int64_t v) { return o.t0 < v; });
  size_t op = it == ops.begin() ? 0 : static_cast<size_t>(std::prev(it) - ops.begin());
  while (op > 0 && ops[op].kind != OpKind::work) --op;
  return op;
}

namespace {

// The batches the rank's waits for data (`waits`: each with its index among the ops) took, with their fetches: on a
// worker's lane, or on the main lane (no workers: the rank's own work).
void index_batches(const RankData& d, const std::vector<std::pair<size_t, Op>>& waits, Chain& c) {
  const std::unordered_map<uint64_t, Fetch> fetched = fetched_batches(d);
  std::map<uint16_t, int64_t> pass_start;
  for (const auto& [sync, b] : fetched) {
    auto [it, fresh] = pass_start.emplace(b.pass, b.start);
    if (!fresh) it->second = std::min(it->second, b.start);
  }
  const int main_lane = d.main.empty() ? -1 : d.main.front().lane;
  std::set<uint8_t> worker_lanes;
  // The queue's depth as the run showed it: the most batches taken later than a fetch began, plus one (at least the
  // workers x prefetch a DataLoader keeps in flight). Batch n then never starts before batch n - slots was taken.
  std::vector<std::pair<int64_t, int64_t>> start_take;  // per batch in consumption order
  for (const auto& [i, o] : waits) {
    auto f = fetched.find(sync_key(o.step, o.micro));
    if (f == fetched.end()) continue;
    start_take.push_back({f->second.start, o.t1});
    if (f->second.lane != main_lane) worker_lanes.insert(f->second.lane);
  }
  c.workers = static_cast<int>(worker_lanes.size());
  c.slots = std::max<int64_t>(1, c.workers) * kReplayPrefetch;
  c.slots = std::max(c.slots, queue_depth_seen(start_take));
  std::map<uint8_t, int64_t> last_on;
  std::vector<int64_t> taken;  // per batch: the measured end of the wait that took it
  for (const auto& [i, o] : waits) {
    auto f = fetched.find(sync_key(o.step, o.micro));
    if (f == fetched.end()) continue;
    Batch b;
    static_cast<Fetch&>(b) = f->second;
    b.sync = f->first;
    b.op = i;
    b.on_main = b.lane == main_lane;
    b.pass_start = pass_start[b.pass];
    b.opens_pass = c.batches.empty() || c.batches.back().pass != b.pass;
    b.pass_lead = b.pass_start - o.t0;
    b.handoff = std::max<int64_t>(0, o.t1 - std::max(b.end, o.t0));
    const int64_t n = static_cast<int64_t>(c.batches.size());
    auto prev = last_on.find(b.lane);
    b.prev = prev == last_on.end() ? -1 : prev->second;
    b.behind = n - c.slots >= 0 ? n - c.slots : -1;
    int64_t allowed = std::max(b.prev >= 0 ? c.batches[static_cast<size_t>(b.prev)].end : b.start, b.pass_start);
    if (b.behind >= 0) allowed = std::max(allowed, taken[static_cast<size_t>(b.behind)]);
    b.idle = b.start - allowed;  // below 0 when the queue held more than `slots`: the fit stays exact
    last_on[b.lane] = n;
    c.takes.push_back({i, b.on_main});  // the rank fetched it itself: its op is that work (OpStream)
    taken.push_back(o.t1);
    c.batches.push_back(std::move(b));
  }
}

// op_at on a measured chain's ops as they stream, for times asked in order, each op passed once: the ops' starts never
// decrease along such a chain, so the op before the first one starting at t or later is the last one passed, and the
// work op op_at walks back to is the last work op passed (none: the chain's first op).
class OpsByTime {
 public:
  explicit OpsByTime(const Chain& c) : ops_(c) { more_ = ops_.next(); }
  bool empty() const { return !seen_first_ && !more_; }
  // op_at(all_ops(c), t) for t no earlier than the last asked: that op, and its index in `index`.
  const Op& at(int64_t t, size_t& index) {
    for (; more_ && ops_.ops()[j_].t0 < t; pass()) {
      const Op& o = ops_.ops()[j_];
      if (!seen_first_) first_ = o, seen_first_ = true;
      if (o.kind == OpKind::work) work_ = o, work_index_ = ops_.first() + j_, seen_work_ = true;
    }
    if (!seen_first_) {  // t is before every op: the first one (lower_bound at the start)
      first_ = ops_.ops()[j_], seen_first_ = true;
    }
    index = seen_work_ ? work_index_ : 0;
    return seen_work_ ? work_ : first_;
  }

 private:
  void pass() {
    if (++j_ < ops_.ops().size()) return;
    j_ = 0;
    more_ = ops_.next();
  }
  OpStream ops_;
  bool more_ = false, seen_first_ = false, seen_work_ = false;
  size_t j_ = 0, work_index_ = 0;
  Op first_, work_;
};

// Each bucket's launch of one rank, placed in its op; `latest`: each bucket's latest launch over the ranks so far.
void place_launches(const RankData& d, const std::vector<uint32_t>& common, Chain& c,
                    std::unordered_map<uint64_t, int64_t>& latest) {
  OpsByTime ops(c);
  if (ops.empty()) return;
  for (const Span& a : d.allreduce) {  // by launch time
    if (!std::binary_search(common.begin(), common.end(), a.step)) continue;
    size_t op = 0;
    const Op& o = ops.at(a.t0, op);
    const int64_t offset = std::clamp<int64_t>(a.t0 - o.t0, 0, o.dur());
    c.launches.push_back({bucket_key(a.step, a.micro, a.bucket), op, offset, a.t1, a.value, o.t0});
    auto [it, fresh] = latest.emplace(c.launches.back().key, c.launches.back().at());
    if (!fresh) it->second = std::max(it->second, c.launches.back().at());
  }
}

// The rank's waits for data (with their index among its ops), and whether any op is a micro-step under no_sync.
std::vector<std::pair<size_t, Op>> waits_for_data(Chain& c) {
  std::vector<std::pair<size_t, Op>> waits;
  OpStream ops(c);
  while (ops.next())
    for (size_t j = 0; j < ops.ops().size(); ++j) {
      const Op& o = ops.ops()[j];
      c.micro_steps |= o.micro > 0;
      if (o.stage == Stage::wait_data && !o.other) waits.push_back({ops.first() + j, o});
    }
  return waits;
}

}  // namespace

// A rank at a time: its batches found in its waits for data, then its launches in its ops (those waits marked), each
// pass over ops made a step at a time and dropped. Then every rank's launches per sync in the order its buckets ran
// (the latest launch over the ranks).
std::vector<Chain> build_chains(const std::vector<RankData>& data, const std::vector<uint32_t>& common) {
  std::vector<Chain> chains(data.size());
  std::unordered_map<uint64_t, int64_t> latest;
  for (size_t r = 0; r < data.size(); ++r) {
    Chain& c = chains[r];
    c.data = &data[r];
    c.steps = &common;
    index_batches(data[r], waits_for_data(c), c);
    place_launches(data[r], common, c, latest);
  }
  for (Chain& c : chains)
    std::sort(c.launches.begin(), c.launches.end(), [&](const Launch& a, const Launch& b) {
      return std::tuple(a.sync(), latest[a.key], a.key) < std::tuple(b.sync(), latest[b.key], b.key);
    });
  return chains;
}

namespace {

// The chain of one rank with its steps' micro-steps repeated (accumulate()): its ops are made so (OpStream); its
// batches are taken again by the repeats and dealt to the workers anew, its launches move with their ops.
Chain accumulated(const Chain& c, int k) {
  Chain out = c;
  out.repeat = k;
  out.batches.clear();
  std::unordered_map<size_t, size_t> at;  // a launch's measured op -> its place in `out`
  for (const Launch& l : c.launches) at.emplace(l.op, 0);
  // The batches in the order the ops take them, dealt to the workers again: batch n on worker n mod workers.
  const int64_t W = c.workers;
  OpStream ops(out);
  while (ops.next())
    for (size_t j = 0; j < ops.ops().size(); ++j) {
      const size_t i = ops.first() + j;
      const Op& o = ops.ops()[j];
      out.micro_steps |= o.micro > 0;  // accumulate() again: it accumulates already
      auto launch = at.find(ops.source(j));
      if (launch != at.end()) launch->second = i;  // the measured op itself comes after its repeats
      const int64_t taken = batch_taken_at(c, ops.source(j));
      if (taken < 0) continue;
      Batch b = c.batches[static_cast<size_t>(taken)];
      const int64_t n = static_cast<int64_t>(out.batches.size());
      b.op = i;
      b.sync = sync_key(o.step, o.micro);
      b.prev = W > 0 && n >= W ? n - W : -1;
      b.behind = n >= out.slots ? n - out.slots : -1;
      b.idle = b.prev >= 0 ? std::max<int64_t>(0, b.idle) : 0;
      b.opens_pass = out.batches.empty() || out.batches.back().pass != b.pass;
      b.pass_lead = b.pass_start - o.t0;
      out.batches.push_back(std::move(b));
    }
  for (Launch& l : out.launches) l.op = at[l.op];
  return out;
}

}  // namespace

std::string accumulate(std::vector<Chain>& cs, int k) {
  for (const Chain& c : cs)
    if (c.micro_steps)
      return "the run accumulates already (micro-steps under no_sync): accum=K replays a run that syncs every "
             "batch";
  for (Chain& c : cs) c = accumulated(c, k);
  return {};
}

Plan measured_plan(const std::vector<Chain>& cs) {
  Plan p;
  std::unordered_map<uint64_t, int64_t> latest;  // bucket -> latest launch over the ranks
  for (const Chain& c : cs)
    for (const Launch& l : c.launches) {
      auto [it, fresh] = latest.emplace(l.key, l.at());
      if (!fresh) it->second = std::max(it->second, l.at());
    }
  for (const Chain& c : cs) {
    p.scales.emplace_back();
    p.take_dur.emplace_back(c.batches.size(), kAsMeasured);
    p.fetch.emplace_back(), p.prev.emplace_back(), p.behind.emplace_back(), p.idle.emplace_back();
    p.origin.emplace_back(), p.waits_for.emplace_back();
    for (const Batch& b : c.batches) {
      p.fetch.back().push_back(b.end - b.start);
      p.prev.back().push_back(b.prev);
      p.behind.back().push_back(b.behind);
      p.idle.back().push_back(b.idle);
      p.origin.back().push_back(b.start);
      p.waits_for.back().push_back(!b.on_main);
    }
    p.launches.push_back(c.launches);
    p.transfer.emplace_back();
    int64_t before = INT64_MIN;  // the sync's previous bucket done
    for (size_t i = 0; i < c.launches.size(); ++i) {
      const Launch& l = c.launches[i];
      if (i == 0 || c.launches[i - 1].sync() != l.sync()) before = INT64_MIN;
      p.transfer.back().push_back(std::max<int64_t>(0, l.done - std::max(latest[l.key], before)));
      before = l.done;
    }
  }
  return p;
}

// Least squares over every bucket of the run; all of one size (or no trend): the mean time per byte, no fixed
// cost.
CommModel fit_comm(const Plan& p) {
  double n = 0, sb = 0, st = 0, sbb = 0, sbt = 0;
  for (size_t r = 0; r < p.launches.size(); ++r)
    for (size_t i = 0; i < p.launches[r].size(); ++i) {
      const double b = static_cast<double>(p.launches[r][i].bytes), t = static_cast<double>(p.transfer[r][i]);
      if (b <= 0) continue;
      n += 1, sb += b, st += t, sbb += b * b, sbt += b * t;
    }
  CommModel m;
  if (n == 0 || sb <= 0) return m;
  const double var = sbb - sb * sb / n, cov = sbt - sb * st / n;
  if (var > 1e-9 * sbb && cov > 0) {
    m.ns_per_byte = cov / var;
    m.fixed_ns = std::max(0.0, (st - m.ns_per_byte * sb) / n);
  } else {
    m.ns_per_byte = st / sb;
  }
  return m;
}

}  // namespace ddp::replay_graph
