// The replay's graph from a run: per rank the chain of ops, the batches its loader made, the bucket launches; and
// the plan as measured.
#include "traces/replay/replay_graph.h"

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>

namespace ddp::replay_graph {

// The op a moment falls in: a launch at a span's end (the last bucket, as backward ends) is that span's, and one
// inside a wait belongs to the work before it (a wait launches nothing).
size_t op_at(const Chain& c, int64_t t) {
  auto it = std::lower_bound(c.ops.begin(), c.ops.end(), t, [](const Op& o, int64_t v) { return o.t0 < v; });
  size_t op = it == c.ops.begin() ? 0 : static_cast<size_t>(std::prev(it) - c.ops.begin());
  while (op > 0 && c.ops[op].kind != OpKind::work) --op;
  return op;
}

namespace {

void gap(Chain& c, uint32_t step, int64_t a, int64_t b) {
  if (b <= a) return;
  Op g;
  g.other = true;
  g.step = step;
  g.t0 = a;
  g.t1 = b;
  c.ops.push_back(g);
}

// The batches the rank's waits for data took, with their fetches: on a worker's lane, or on the main lane (no
// workers: the rank's own work).
void index_batches(const RankData& d, Chain& c) {
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
  for (const Op& o : c.ops) {
    if (o.stage != Stage::wait_data || o.other) continue;
    auto f = fetched.find(sync_key(o.step, o.micro));
    if (f == fetched.end()) continue;
    start_take.push_back({f->second.start, o.t1});
    if (f->second.lane != main_lane) worker_lanes.insert(f->second.lane);
  }
  c.workers = static_cast<int>(worker_lanes.size());
  c.slots = std::max<int64_t>(1, c.workers) * kReplayPrefetch;
  c.slots = std::max(c.slots, queue_depth_seen(start_take));
  std::map<uint8_t, int64_t> last_on;
  for (size_t i = 0; i < c.ops.size(); ++i) {
    Op& o = c.ops[i];
    if (o.stage != Stage::wait_data || o.other) continue;
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
    if (b.on_main) o.kind = OpKind::work;  // the rank fetched it itself
    b.handoff = std::max<int64_t>(0, o.t1 - std::max(b.end, o.t0));
    const int64_t n = static_cast<int64_t>(c.batches.size());
    auto prev = last_on.find(b.lane);
    b.prev = prev == last_on.end() ? -1 : prev->second;
    b.behind = n - c.slots >= 0 ? n - c.slots : -1;
    int64_t allowed = std::max(b.prev >= 0 ? c.batches[static_cast<size_t>(b.prev)].end : b.start, b.pass_start);
    if (b.behind >= 0) allowed = std::max(allowed, c.ops[c.batches[static_cast<size_t>(b.behind)].op].t1);
    b.idle = b.start - allowed;  // below 0 when the queue held more than `slots`: the fit stays exact
    last_on[b.lane] = n;
    c.batch_of_op[i] = static_cast<size_t>(n);
    c.batches.push_back(std::move(b));
  }
}

// A step's main-lane spans in the order the chain takes them: by start; at one moment a span of no length first (a
// wait for a batch that was there: it takes no time, and after the span it starts with it would lie inside that span
// and be lost with its batch), then the longer (a span holds the ones that start with it).
std::vector<size_t> in_chain_order(const RankData& d, std::vector<size_t> spans) {
  std::stable_sort(spans.begin(), spans.end(), [&](size_t a, size_t b) {
    const Span &x = d.main[a], &y = d.main[b];
    return std::tuple(x.t0, x.dur() > 0, -x.t1) < std::tuple(y.t0, y.dur() > 0, -y.t1);
  });
  return spans;
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
      for (size_t i : in_chain_order(d, idx->second)) {
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
        if (i < d.main_cpu.size() && d.main_cpu[i].known()) {
          o.cpu = int64_t{d.main_cpu[i].cpu_us} * 1000;
          o.wait = d.main_cpu[i].wait_known() ? int64_t{d.main_cpu[i].wait_us} * 1000 : -1;
        }
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
  index_batches(d, c);
  return c;
}

// Each bucket's launch, placed in its op; per sync in the order the buckets ran (the latest launch over the ranks).
void place_launches(const std::vector<RankData>& data, const std::vector<uint32_t>& common, std::vector<Chain>& cs) {
  std::unordered_map<uint64_t, int64_t> latest;
  for (size_t r = 0; r < cs.size(); ++r) {
    Chain& c = cs[r];
    for (const Span& a : data[r].allreduce) {
      if (!std::binary_search(common.begin(), common.end(), a.step) || c.ops.empty()) continue;
      const size_t op = op_at(c, a.t0);
      const int64_t offset = std::clamp<int64_t>(a.t0 - c.ops[op].t0, 0, c.ops[op].dur());
      c.launches.push_back({bucket_key(a.step, a.micro, a.bucket), op, offset, a.t1, a.value});
      auto [it, fresh] = latest.emplace(c.launches.back().key, c.ops[op].t0 + offset);
      if (!fresh) it->second = std::max(it->second, c.ops[op].t0 + offset);
    }
  }
  for (Chain& c : cs)
    std::sort(c.launches.begin(), c.launches.end(), [&](const Launch& a, const Launch& b) {
      return std::tuple(a.sync(), latest[a.key], a.key) < std::tuple(b.sync(), latest[b.key], b.key);
    });
}

}  // namespace

std::vector<Chain> build_chains(const std::vector<RankData>& data, const std::vector<uint32_t>& common) {
  std::vector<Chain> chains;
  for (const RankData& d : data) chains.push_back(build(d, common));
  place_launches(data, common, chains);
  return chains;
}

namespace {

// The chain of one rank with its steps' micro-steps repeated (accumulate()).
Chain accumulated(const Chain& c, int k) {
  Chain out;
  out.workers = c.workers;
  out.slots = c.slots;
  std::vector<size_t> at(c.ops.size(), 0);  // measured op -> its place in `out`
  std::vector<size_t> source;               // out's op -> the measured op it copies
  auto push = [&](size_t q, uint8_t micro, bool copy) {
    Op o = c.ops[q];
    if (copy) {
      o.micro = micro;
      if (o.kind == OpKind::wait_data && !c.batch_of_op.count(q)) o.kind = OpKind::work;  // no batch: its duration
    } else {
      at[q] = out.ops.size();
    }
    source.push_back(q);
    out.ops.push_back(o);
  };
  for (size_t i = 0; i < c.ops.size();) {
    if (c.ops[i].kind != OpKind::step_begin) {
      push(i++, 0, false);
      continue;
    }
    size_t end = i + 1, last_backward = i;
    while (end < c.ops.size() && c.ops[end].kind != OpKind::step_end) {
      if (!c.ops[end].other && c.ops[end].stage == Stage::backward) last_backward = end;
      ++end;
    }
    push(i, 0, false);
    for (int rep = 1; rep < k && last_backward > i; ++rep)
      for (size_t q = i + 1; q <= last_backward; ++q) push(q, static_cast<uint8_t>(rep), true);
    for (size_t q = i + 1; q <= end && q < c.ops.size(); ++q) push(q, 0, false);
    i = end + 1;
  }
  // The batches in the order the ops take them, dealt to the workers again: batch n on worker n mod workers.
  const int64_t W = c.workers;
  for (size_t i = 0; i < out.ops.size(); ++i) {
    auto it = c.batch_of_op.find(source[i]);
    if (it == c.batch_of_op.end()) continue;
    Batch b = c.batches[it->second];
    const int64_t n = static_cast<int64_t>(out.batches.size());
    b.op = i;
    b.sync = sync_key(out.ops[i].step, out.ops[i].micro);
    b.prev = W > 0 && n >= W ? n - W : -1;
    b.behind = n >= out.slots ? n - out.slots : -1;
    b.idle = b.prev >= 0 ? std::max<int64_t>(0, b.idle) : 0;
    b.opens_pass = out.batches.empty() || out.batches.back().pass != b.pass;
    b.pass_lead = b.pass_start - out.ops[i].t0;
    out.batch_of_op[i] = static_cast<size_t>(n);
    out.batches.push_back(std::move(b));
  }
  out.launches = c.launches;
  for (Launch& l : out.launches) l.op = at[l.op];
  return out;
}

}  // namespace

std::string accumulate(std::vector<Chain>& cs, int k) {
  for (const Chain& c : cs)
    for (const Op& o : c.ops)
      if (o.micro > 0)
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
      auto [it, fresh] = latest.emplace(l.key, c.ops[l.op].t0 + l.offset);
      if (!fresh) it->second = std::max(it->second, c.ops[l.op].t0 + l.offset);
    }
  for (const Chain& c : cs) {
    p.dur.emplace_back();
    for (const Op& o : c.ops) p.dur.back().push_back(o.dur());
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
