// The replay of replay.h: chains of ops per rank, run in lock step at the collectives.
#include "traces/analysis/replay.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_map>

namespace ddp::analysis_detail {
namespace {

enum class OpKind : uint8_t { work, wait_data, wait_comm, step_begin, step_end };

struct Op {
  OpKind kind = OpKind::work;
  Stage stage = Stage::step;
  bool other = false;  // untracked time between spans
  uint32_t step = 0;
  uint8_t micro = 0;
  int64_t t0 = 0, t1 = 0;  // measured
  int64_t ready = 0;       // wait_data: the batch's arrival, measured
  int64_t dur() const { return t1 - t0; }
};

struct Launch {
  uint64_t key = 0;
  size_t op = 0;       // the op it fell in
  int64_t offset = 0;  // from that op's measured start
  int64_t done = 0;    // this rank's completion of the bucket, measured
};

// One batch a rank consumed, as its loader worker made it: the worker's batches run one after another, each starting
// when the worker is free and the bounded queue has room (the batch `slots` before it taken), after the idle the
// measured run showed beyond both (scheduling, the index queue); it arrives its hand-over (pin, the queue) after its
// fetch ends.
struct Batch {
  uint64_t sync = 0;                // sync_key(step, micro) of the step that consumed it
  uint8_t lane = 0;                 // the worker's lane
  int64_t start = 0, end = 0;       // its fetch, measured (first span's start, last span's end on the worker's lane)
  int64_t idle = 0;                 // measured start minus what allowed it
  int64_t handoff = 0;              // measured arrival minus fetch end
  int64_t prev = -1;                // the worker's batch before it (index), -1: none analysed
  int64_t behind = -1;              // the batch `slots` before it in consumption order, -1: none analysed
  size_t op = 0;                    // the wait op that takes it
  std::map<Stage, int64_t> stages;  // its time per loader stage on the worker
};

struct Chain {
  std::vector<Op> ops;
  std::vector<Batch> batches;                      // in consumption order
  std::unordered_map<size_t, size_t> batch_of_op;  // wait_data op -> batch
  std::vector<Launch> launches;
  std::vector<std::vector<size_t>> at_op;                     // op -> its launches
  std::unordered_map<uint64_t, std::vector<size_t>> of_sync;  // sync_key -> its launches
};

void gap(Chain& c, uint32_t step, int64_t a, int64_t b) {
  if (b <= a) return;
  Op g;
  g.other = true;
  g.step = step;
  g.t0 = a;
  g.t1 = b;
  c.ops.push_back(g);
}

// The batches the rank's waits for data took, with their fetches on the loader's worker lanes. A fetch on the main
// lane (no workers) is the rank's own work: its wait becomes work.
void index_batches(const RankData& d, Chain& c) {
  // Per batch, its spans per lane; the worker's lane is the one that spent the most on it (pin on a thread of its
  // own, a user's pin thread, is then part of the hand-over).
  std::unordered_map<uint64_t, std::map<uint8_t, Batch>> by_lane;
  for (const Span& s : d.loader) {
    Batch& b = by_lane[sync_key(s.step, s.micro)][s.lane];
    if (b.stages.empty()) b.lane = s.lane, b.start = s.t0, b.end = s.t1;
    b.start = std::min(b.start, s.t0);
    b.end = std::max(b.end, s.t1);
    b.stages[s.stage] += s.dur();
  }
  std::unordered_map<uint64_t, Batch> fetched;
  for (auto& [sync, lanes] : by_lane) {
    auto spent = [](const Batch& b) {
      int64_t t = 0;
      for (const auto& [stage, ns] : b.stages) t += ns;
      return t;
    };
    auto most = std::max_element(lanes.begin(), lanes.end(),
                                 [&](const auto& a, const auto& b) { return spent(a.second) < spent(b.second); });
    fetched[sync] = std::move(most->second);
  }
  const int main_lane = d.main.empty() ? -1 : d.main.front().lane;
  // The queue's depth as the run showed it: the most batches taken later than a fetch began, plus one (at least the
  // workers x prefetch a DataLoader keeps in flight). Batch n then never starts before batch n - slots was taken.
  std::vector<std::pair<int64_t, int64_t>> start_take;  // per batch in consumption order
  for (const Op& o : c.ops) {
    if (o.stage != Stage::wait_data || o.other) continue;
    auto f = fetched.find(sync_key(o.step, o.micro));
    if (f != fetched.end()) start_take.push_back({f->second.start, o.t1});
  }
  int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(d.loader_lanes.size())) * kReplayPrefetch;
  for (size_t n = 0; n < start_take.size(); ++n) {
    int64_t depth = 0;
    for (size_t m = 0; m < n; ++m) depth += start_take[m].second > start_take[n].first;
    slots = std::max(slots, depth + 1);
  }
  std::map<uint8_t, int64_t> last_on;
  for (size_t i = 0; i < c.ops.size(); ++i) {
    Op& o = c.ops[i];
    if (o.stage != Stage::wait_data || o.other) continue;
    auto f = fetched.find(sync_key(o.step, o.micro));
    if (f == fetched.end()) continue;
    Batch b = f->second;
    b.sync = f->first;
    b.op = i;
    if (b.lane == main_lane) {
      o.kind = OpKind::work;  // the rank fetched it itself
    }
    b.handoff = std::max<int64_t>(0, o.t1 - b.end);
    const int64_t n = static_cast<int64_t>(c.batches.size());
    auto prev = last_on.find(b.lane);
    b.prev = prev == last_on.end() ? -1 : prev->second;
    b.behind = n - slots >= 0 ? n - slots : -1;
    int64_t allowed = b.prev >= 0 ? c.batches[static_cast<size_t>(b.prev)].end : b.start;
    if (b.behind >= 0) allowed = std::max(allowed, c.ops[c.batches[static_cast<size_t>(b.behind)].op].t1);
    b.idle = b.start - allowed;  // below 0 when the queue held more than `slots`: the fit stays exact
    last_on[b.lane] = n;
    c.batch_of_op[i] = static_cast<size_t>(n);
    c.batches.push_back(std::move(b));
  }
}

// One rank's analysed steps as ops covering its main thread from the first step's start to the last step's end.
Chain build(const RankData& d, const std::vector<uint32_t>& common) {
  Chain c;
  int64_t cursor = INT64_MIN;
  for (uint32_t s : common) {
    auto iv = d.steps.find(s);
    if (iv == d.steps.end()) continue;
    if (cursor != INT64_MIN) gap(c, s, cursor, iv->second.t0);  // between steps (a checkpoint outside the step)
    cursor = std::max(cursor, iv->second.t0);
    c.ops.push_back({OpKind::step_begin, Stage::step, false, s, 0, cursor, cursor, 0});
    auto idx = d.main_by_step.find(s);
    if (idx != d.main_by_step.end())
      for (size_t i : idx->second) {
        const Span& sp = d.main[i];
        if (sp.t0 < cursor) {  // inside the last top-level span: a fetch inside wait_data is the rank's own work
          if (!c.ops.empty() && c.ops.back().kind == OpKind::wait_data && is_data_stage(sp.stage))
            c.ops.back().kind = OpKind::work;
          continue;
        }
        gap(c, s, cursor, sp.t0);
        Op o;
        o.stage = sp.stage;
        o.step = s;
        o.micro = sp.micro;
        o.t0 = sp.t0;
        o.t1 = sp.t1;
        if (sp.stage == Stage::wait_comm) o.kind = OpKind::wait_comm;
        if (sp.stage == Stage::wait_data && sp.dur() > kReplayStallNs) {
          o.kind = OpKind::wait_data;
          o.ready = sp.t1;
        }
        c.ops.push_back(o);
        cursor = sp.t1;
      }
    gap(c, s, cursor, iv->second.t1);
    cursor = std::max(cursor, iv->second.t1);
    c.ops.push_back({OpKind::step_end, Stage::step, false, s, 0, cursor, cursor, 0});
  }
  // Each bucket's launch, placed in the work it ended or fell in: a launch at a span's end (the last bucket, as
  // backward ends) is that span's, and one inside a wait belongs to the work before it (the wait launches nothing).
  for (const Span& a : d.allreduce) {
    if (!std::binary_search(common.begin(), common.end(), a.step) || c.ops.empty()) continue;
    auto it = std::lower_bound(c.ops.begin(), c.ops.end(), a.t0, [](const Op& o, int64_t t) { return o.t0 < t; });
    size_t op = it == c.ops.begin() ? 0 : static_cast<size_t>(std::prev(it) - c.ops.begin());
    while (op > 0 && c.ops[op].kind != OpKind::work) --op;
    const int64_t offset = std::clamp<int64_t>(a.t0 - c.ops[op].t0, 0, c.ops[op].dur());
    c.launches.push_back({bucket_key(a.step, a.micro, a.bucket), op, offset, a.t1});
  }
  index_batches(d, c);
  c.at_op.resize(c.ops.size());
  for (size_t i = 0; i < c.launches.size(); ++i) {
    c.at_op[c.launches[i].op].push_back(i);
    c.of_sync[c.launches[i].key >> 16].push_back(i);
  }
  return c;
}

// The edit as a new duration per op and per batch's fetch; unedited: the measured ones.
struct Edited {
  std::vector<std::vector<int64_t>> dur, fetch;
};

// The median rank's value; of an even count the lower middle one (of two ranks, the faster: the one not at fault).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

bool edits(const Op& o, const ReplayEdit& e) {
  return o.kind == OpKind::work && (e.other ? o.other : (!o.other && o.stage == e.stage));
}

Edited apply(const std::vector<Chain>& chains, const std::vector<RankData>& data, const std::optional<ReplayEdit>& e) {
  Edited out;
  for (const Chain& c : chains) {
    out.dur.emplace_back();
    out.fetch.emplace_back();
    for (const Op& o : c.ops) out.dur.back().push_back(o.dur());
    for (const Batch& b : c.batches) out.fetch.back().push_back(b.end - b.start);
  }
  if (!e || e->rank < 0 || e->rank >= static_cast<int>(chains.size())) return out;
  const size_t R = static_cast<size_t>(e->rank);
  if (!e->other && stage_has(e->stage, kStageLoaderThread)) {
    // A loader stage: each batch of the rank fetched in what the median rank's same batch took for it.
    std::vector<std::unordered_map<uint64_t, int64_t>> spent(chains.size());
    for (size_t r = 0; r < chains.size(); ++r)
      for (const Batch& b : chains[r].batches) {
        auto it = b.stages.find(e->stage);
        spent[r][b.sync] = it == b.stages.end() ? 0 : it->second;
      }
    const Chain& c = chains[R];
    for (size_t i = 0; i < c.batches.size(); ++i) {
      std::vector<double> per_rank;
      for (const auto& m : spent)
        per_rank.push_back(m.count(c.batches[i].sync) ? static_cast<double>(m.at(c.batches[i].sync)) : 0.0);
      const int64_t saving = std::max<int64_t>(0, spent[R][c.batches[i].sync] - static_cast<int64_t>(median(per_rank)));
      out.fetch[R][i] -= saving;
      if (c.ops[c.batches[i].op].kind == OpKind::work)  // fetched on the main thread: its wait is the fetch
        out.dur[R][c.batches[i].op] = std::max<int64_t>(0, out.dur[R][c.batches[i].op] - saving);
    }
    return out;
  }
  // A main-thread stage (or the untracked time): per step, the rank's total set to the median rank's.
  std::vector<std::map<uint32_t, double>> totals(chains.size());
  for (size_t r = 0; r < chains.size(); ++r)
    for (const Op& o : chains[r].ops)
      if (edits(o, *e)) totals[r][o.step] += static_cast<double>(o.dur());
  for (size_t i = 0; i < chains[R].ops.size(); ++i) {
    const Op& o = chains[R].ops[i];
    if (!edits(o, *e)) continue;
    std::vector<double> per_rank;
    for (const auto& t : totals) per_rank.push_back(t.count(o.step) ? t.at(o.step) : 0.0);
    const double mine = totals[R][o.step];
    if (mine > 0)
      out.dur[R][i] = static_cast<int64_t>(std::llround(static_cast<double>(o.dur()) * median(per_rank) / mine));
  }
  return out;
}

struct Timeline {
  std::vector<std::map<uint32_t, std::pair<int64_t, int64_t>>> steps;  // per rank: step -> replayed begin, end
  size_t forced = 0;  // waits passed as measured because no rank could move (a trace cut short)
};

Timeline run(const std::vector<Chain>& chains, const Edited& ed) {
  const size_t R = chains.size();
  Timeline tl;
  tl.steps.resize(R);
  std::vector<size_t> cur(R, 0);
  std::vector<int64_t> t(R, 0);
  std::vector<std::vector<int64_t>> start(R);
  // Per sync: (rank, op of its latest launch); per bucket: the launches over ranks, replayed, as they come.
  std::unordered_map<uint64_t, std::vector<std::pair<size_t, size_t>>> last_launch_op;
  std::unordered_map<uint64_t, int64_t> measured_latest;  // bucket -> latest launch over ranks, measured
  for (size_t r = 0; r < R; ++r) {
    start[r].assign(chains[r].ops.size(), 0);
    if (!chains[r].ops.empty()) t[r] = chains[r].ops.front().t0;
    std::unordered_map<uint64_t, size_t> latest;
    for (const Launch& l : chains[r].launches) {
      const uint64_t sync = l.key >> 16;
      latest[sync] = std::max(latest.count(sync) ? latest[sync] : 0, l.op);
      const int64_t at = chains[r].ops[l.op].t0 + l.offset;
      auto [it, fresh] = measured_latest.emplace(l.key, at);
      if (!fresh) it->second = std::max(it->second, at);
    }
    for (const auto& [sync, op] : latest) last_launch_op[sync].push_back({r, op});
  }
  std::unordered_map<uint64_t, int64_t> replayed_latest;   // bucket -> latest replayed launch so far
  std::vector<std::vector<int64_t>> fetched(R), taken(R);  // per batch: replayed fetch end, replayed take
  for (size_t r = 0; r < R; ++r) {
    fetched[r].assign(chains[r].batches.size(), 0);
    taken[r].assign(chains[r].batches.size(), 0);
  }
  auto fetch_end = [&](size_t r, size_t bi) {
    const Batch& b = chains[r].batches[bi];
    int64_t allowed = b.prev >= 0 ? fetched[r][static_cast<size_t>(b.prev)] : b.start;
    if (b.behind >= 0) allowed = std::max(allowed, taken[r][static_cast<size_t>(b.behind)]);
    return fetched[r][bi] = allowed + b.idle + ed.fetch[r][bi];
  };
  auto launched = [&](size_t r, size_t op) {
    const Op& o = chains[r].ops[op];
    const double scale = o.dur() > 0 ? static_cast<double>(ed.dur[r][op]) / static_cast<double>(o.dur()) : 1.0;
    for (size_t li : chains[r].at_op[op]) {
      const Launch& l = chains[r].launches[li];
      const int64_t at = start[r][op] + static_cast<int64_t>(std::llround(static_cast<double>(l.offset) * scale));
      auto [it, fresh] = replayed_latest.emplace(l.key, at);
      if (!fresh) it->second = std::max(it->second, at);
    }
  };
  auto sync_ready = [&](uint64_t sync) {
    auto it = last_launch_op.find(sync);
    if (it == last_launch_op.end()) return true;
    for (const auto& [r, op] : it->second)
      if (cur[r] <= op) return false;
    return true;
  };
  auto comm_done = [&](size_t r, uint64_t sync) {
    int64_t done = INT64_MIN;
    auto it = chains[r].of_sync.find(sync);
    if (it == chains[r].of_sync.end()) return done;
    for (size_t li : it->second) {
      const Launch& l = chains[r].launches[li];
      const int64_t transfer = std::max<int64_t>(0, l.done - measured_latest[l.key]);
      done = std::max(done, replayed_latest[l.key] + transfer);
    }
    return done;
  };
  bool left = true;
  while (left) {
    left = false;
    bool moved = false;
    for (size_t r = 0; r < R; ++r) {
      const auto& ops = chains[r].ops;
      while (cur[r] < ops.size()) {
        const size_t i = cur[r];
        const Op& o = ops[i];
        if (o.kind == OpKind::wait_comm && !sync_ready(sync_key(o.step, o.micro))) break;
        start[r][i] = t[r];
        auto batch = chains[r].batch_of_op.find(i);
        const int64_t arrives = batch == chains[r].batch_of_op.end()
                                    ? o.ready
                                    : fetch_end(r, batch->second) + chains[r].batches[batch->second].handoff;
        switch (o.kind) {
          case OpKind::work:
            t[r] += ed.dur[r][i];
            break;
          case OpKind::wait_data:
            t[r] = std::max(t[r], arrives);
            break;
          case OpKind::wait_comm:
            t[r] = std::max(t[r], comm_done(r, sync_key(o.step, o.micro)));
            break;
          case OpKind::step_begin:
            tl.steps[r][o.step].first = t[r];
            break;
          case OpKind::step_end:
            tl.steps[r][o.step].second = t[r];
            break;
        }
        if (batch != chains[r].batch_of_op.end()) taken[r][batch->second] = t[r];
        launched(r, i);
        ++cur[r];
        moved = true;
      }
      left |= cur[r] < ops.size();
    }
    if (left && !moved) {
      // Every rank waits on a sync another never reaches (a trace cut short): the first blocked wait passes as
      // measured, so the replay ends instead of spinning.
      for (size_t r = 0; r < R; ++r)
        if (cur[r] < chains[r].ops.size()) {
          const size_t i = cur[r]++;
          start[r][i] = t[r];
          t[r] += chains[r].ops[i].dur();
          ++tl.forced;
          break;
        }
    }
  }
  return tl;
}

}  // namespace

ReplayResult replay(const std::vector<RankData>& data, const std::vector<uint32_t>& common,
                    const std::optional<ReplayEdit>& edit) {
  ReplayResult res;
  if (data.empty() || common.empty()) {
    res.why = "no steps in common to replay";
    return res;
  }
  std::vector<Chain> chains;
  for (const RankData& d : data) chains.push_back(build(d, common));
  const Timeline fit = run(chains, apply(chains, data, std::nullopt));
  const Timeline what_if = edit ? run(chains, apply(chains, data, edit)) : fit;
  std::vector<double> errors;
  double replayed_sum = 0, measured_sum = 0;
  for (uint32_t s : common) {
    double measured = 0, replayed = 0, edited = 0;
    int n = 0;
    for (size_t r = 0; r < data.size(); ++r) {
      auto iv = data[r].steps.find(s);
      auto f = fit.steps[r].find(s);
      auto w = what_if.steps[r].find(s);
      if (iv == data[r].steps.end() || f == fit.steps[r].end() || w == what_if.steps[r].end()) continue;
      measured += static_cast<double>(iv->second.t1 - iv->second.t0);
      replayed += static_cast<double>(f->second.second - f->second.first);
      edited += static_cast<double>(w->second.second - w->second.first);
      ++n;
    }
    if (n == 0 || measured <= 0) continue;
    errors.push_back(std::fabs(replayed - measured) / measured);
    res.steps.push_back(ms(edited / n));
    replayed_sum += edited / n;
    measured_sum += measured / n;
  }
  if (errors.empty()) {
    res.why = "no step was recorded on every rank";
    return res;
  }
  res.ok = true;
  if (fit.forced > 0)
    res.why =
        std::to_string(fit.forced) + " wait(s) for a collective some rank never reached were replayed as measured";
  res.step_ms = ms(replayed_sum / static_cast<double>(errors.size()));
  res.measured_ms = ms(measured_sum / static_cast<double>(errors.size()));
  double sum = 0;
  for (double e : errors) sum += e;
  res.error_mean = sum / static_cast<double>(errors.size());
  std::sort(errors.begin(), errors.end());
  res.error_p90 = errors[std::min(errors.size() - 1, static_cast<size_t>(std::ceil(0.9 * errors.size())) - 1)];
  return res;
}

}  // namespace ddp::analysis_detail
