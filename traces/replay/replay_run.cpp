// The replay's run (replay_run.h): the chains advanced in lock step at the collectives.
#include "traces/replay/replay_run.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace ddp::replay_graph {

Timeline run(const std::vector<Chain>& chains, const Plan& p) {
  const size_t R = chains.size();
  Timeline tl;
  tl.steps.resize(R);
  tl.ops.resize(R), tl.fetches.resize(R), tl.buckets.resize(R);
  for (size_t r = 0; r < R; ++r) {
    tl.ops[r].resize(chains[r].ops.size());
    tl.fetches[r].resize(chains[r].batches.size());
    tl.buckets[r].resize(p.launches[r].size());
  }
  std::vector<size_t> cur(R, 0);
  std::vector<int64_t> t(R, 0);
  std::vector<std::vector<std::vector<size_t>>> at_op(R);                     // per op: its launches
  std::vector<std::unordered_map<uint64_t, std::vector<size_t>>> of_sync(R);  // sync -> its launches, in order
  // Per sync: (rank, op of its latest launch); per bucket: the latest replayed launch over the ranks so far.
  std::unordered_map<uint64_t, std::vector<std::pair<size_t, size_t>>> last_launch_op;
  for (size_t r = 0; r < R; ++r) {
    at_op[r].resize(chains[r].ops.size());
    if (!chains[r].ops.empty()) t[r] = chains[r].ops.front().t0;
    std::unordered_map<uint64_t, size_t> latest;
    for (size_t li = 0; li < p.launches[r].size(); ++li) {
      const Launch& l = p.launches[r][li];
      at_op[r][l.op].push_back(li);
      of_sync[r][l.sync()].push_back(li);
      auto [it, fresh] = latest.emplace(l.sync(), l.op);
      if (!fresh) it->second = std::max(it->second, l.op);
    }
    for (const auto& [sync, op] : latest) last_launch_op[sync].push_back({r, op});
  }
  std::unordered_map<uint64_t, int64_t> replayed_latest;
  std::vector<std::vector<int64_t>> fetched(R), taken(R);  // per batch: replayed fetch end, replayed take
  for (size_t r = 0; r < R; ++r) {
    fetched[r].assign(chains[r].batches.size(), 0);
    taken[r].assign(chains[r].batches.size(), 0);
  }
  std::vector<int64_t> pass_began(R, INT64_MIN);  // per rank: when the pass of the batch it takes next began
  auto fetch_end = [&](size_t r, size_t bi) {
    const Batch& b = chains[r].batches[bi];
    if (b.opens_pass) pass_began[r] = t[r] + b.pass_lead;  // t: the replayed start of the batch's wait
    const int64_t prev = p.prev[r][bi], behind = p.behind[r][bi];
    int64_t allowed = std::max(prev >= 0 ? fetched[r][static_cast<size_t>(prev)] : p.origin[r][bi], pass_began[r]);
    if (behind >= 0) allowed = std::max(allowed, taken[r][static_cast<size_t>(behind)]);
    tl.fetches[r][bi] = {allowed + p.idle[r][bi], allowed + p.idle[r][bi] + p.fetch[r][bi]};
    return fetched[r][bi] = tl.fetches[r][bi].second;
  };
  auto launched = [&](size_t r, size_t op) {
    const Op& o = chains[r].ops[op];
    const double scale = o.dur() > 0 ? static_cast<double>(p.dur[r][op]) / static_cast<double>(o.dur()) : 1.0;
    for (size_t li : at_op[r][op]) {
      const Launch& l = p.launches[r][li];
      const int64_t at =
          tl.ops[r][op].first + static_cast<int64_t>(std::llround(static_cast<double>(l.offset) * scale));
      auto [it, fresh] = replayed_latest.emplace(l.key, at);
      if (!fresh) it->second = std::max(it->second, at);
      tl.buckets[r][li].first = at;
    }
  };
  auto sync_ready = [&](uint64_t sync) {
    auto it = last_launch_op.find(sync);
    if (it == last_launch_op.end()) return true;
    for (const auto& [r, op] : it->second)
      if (cur[r] <= op) return false;
    return true;
  };
  // The sync's buckets one after another, each once every rank launched it and the one before is done.
  auto comm_done = [&](size_t r, uint64_t sync) {
    int64_t done = INT64_MIN;
    auto it = of_sync[r].find(sync);
    if (it == of_sync[r].end()) return done;
    for (size_t li : it->second) {
      done = std::max(replayed_latest[p.launches[r][li].key], done) + p.transfer[r][li];
      tl.buckets[r][li].second = done;
    }
    return done;
  };
  std::vector<uint8_t> in_step(R, 0);
  auto advance = [&](size_t r, size_t i) {
    const Op& o = chains[r].ops[i];
    const int64_t before = t[r];
    auto batch = chains[r].batch_of_op.find(i);
    if (batch != chains[r].batch_of_op.end() && p.waits_for[r][batch->second]) {
      const size_t bi = batch->second;
      t[r] = std::max(t[r], fetch_end(r, bi)) + chains[r].batches[bi].handoff;
    } else if (batch != chains[r].batch_of_op.end()) {  // the rank fetched it itself: the op is that work
      fetch_end(r, batch->second);
      t[r] += p.dur[r][i];
    } else {
      switch (o.kind) {
        case OpKind::work:
          t[r] += p.dur[r][i];
          break;
        case OpKind::wait_data:
          t[r] = std::max(t[r], o.ready);
          break;
        case OpKind::wait_comm:
          t[r] = std::max(t[r], comm_done(r, sync_key(o.step, o.micro)));
          break;
        case OpKind::step_begin:
          tl.steps[r][o.step].first = t[r];
          in_step[r] = 1;
          break;
        case OpKind::step_end:
          tl.steps[r][o.step].second = t[r];
          in_step[r] = 0;
          break;
      }
    }
    if (batch != chains[r].batch_of_op.end()) taken[r][batch->second] = t[r];
    if (in_step[r]) tl.stage_ns[o.other ? 256 : static_cast<size_t>(o.stage)] += static_cast<double>(t[r] - before);
    tl.ops[r][i] = {before, t[r]};
    launched(r, i);
    ++cur[r];
  };
  bool left = true;
  while (left) {
    left = false;
    bool moved = false;
    for (size_t r = 0; r < R; ++r) {
      const auto& ops = chains[r].ops;
      while (cur[r] < ops.size()) {
        const Op& o = ops[cur[r]];
        if (o.kind == OpKind::wait_comm && !sync_ready(sync_key(o.step, o.micro))) break;
        advance(r, cur[r]);
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
          tl.ops[r][i].first = t[r];
          t[r] += chains[r].ops[i].dur();
          tl.ops[r][i].second = t[r];
          ++tl.forced;
          break;
        }
    }
  }
  return tl;
}

}  // namespace ddp::replay_graph
