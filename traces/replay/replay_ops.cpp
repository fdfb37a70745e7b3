// A rank's ops (replay_graph.h), made a step at a time from its spans, and the duration a plan gives each.
#include <algorithm>
#include <climits>
#include <cmath>
#include <tuple>

#include "traces/replay/replay_graph.h"

namespace ddp::replay_graph {
namespace {

Op marker(OpKind kind, uint32_t step, int64_t t) {
  Op o;
  o.kind = kind;
  o.step = step;
  o.t0 = o.t1 = t;
  return o;
}

// Untracked time from `a` to `b`; with no op before it in `ops`, it follows the step before's end.
void gap(std::vector<Op>& ops, uint32_t step, int64_t a, int64_t b) {
  if (b <= a) return;
  Op g;
  g.other = true;
  g.step = step;
  g.t0 = a;
  g.t1 = b;
  g.after = ops.empty() ? Stage::step : ops.back().stage;
  g.after_step_end = ops.empty() || ops.back().kind == OpKind::step_end;
  ops.push_back(g);
}

// Main-lane span `i` of `d` as an op, with its CPU split when it carries one.
Op from_span(const RankData& d, size_t i, uint32_t step) {
  const Span& sp = d.main[i];
  Op o;
  o.stage = sp.stage;
  o.step = step;
  o.micro = sp.micro;
  o.t0 = sp.t0;
  o.t1 = sp.t1;
  if (i < d.main_cpu.size() && d.main_cpu[i].known()) {
    o.cpu = int64_t{d.main_cpu[i].cpu_us} * 1000;
    o.wait = d.main_cpu[i].wait_known() ? int64_t{d.main_cpu[i].wait_us} * 1000 : -1;
  }
  if (sp.stage == Stage::wait_comm) o.kind = OpKind::wait_comm;
  if (sp.stage == Stage::wait_data && sp.dur() > kReplayStallNs) o.kind = OpKind::wait_data;
  return o;
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

}  // namespace

// One analysed step as ops covering the rank's main thread from the end of the step before (the time between them is
// an op of its own: a checkpoint outside the step) to the step's end.
void OpStream::make_measured(uint32_t step) {
  const RankData& d = *c_.data;
  auto iv = d.steps.find(step);
  if (iv == d.steps.end()) return;
  if (cursor_ != INT64_MIN) gap(measured_, step, cursor_, iv->second.t0);
  cursor_ = std::max(cursor_, iv->second.t0);
  measured_.push_back(marker(OpKind::step_begin, step, cursor_));
  auto idx = d.main_by_step.find(step);
  if (idx != d.main_by_step.end())
    for (size_t i : in_chain_order(d, idx->second)) {
      const Span& sp = d.main[i];
      if (sp.t0 < cursor_) {  // inside the last top-level span: a fetch inside wait_data is the rank's own work
        if (measured_.back().kind == OpKind::wait_data && is_data_stage(sp.stage)) measured_.back().kind = OpKind::work;
        continue;
      }
      gap(measured_, step, cursor_, sp.t0);
      measured_.push_back(from_span(d, i, step));
      cursor_ = sp.t1;
    }
  gap(measured_, step, cursor_, iv->second.t1);
  cursor_ = std::max(cursor_, iv->second.t1);
  measured_.push_back(marker(OpKind::step_end, step, cursor_));
}

// A wait for a batch the rank fetched itself is that work (replay_graph.cpp index_batches).
void OpStream::mark_takes() {
  const size_t end = measured_first_ + measured_.size();
  for (; take_ < c_.takes.size() && c_.takes[take_].op < end; ++take_) {
    const Take& t = c_.takes[take_];
    if (t.op >= measured_first_ && t.by_rank) measured_[t.op - measured_first_].kind = OpKind::work;
  }
}

bool OpStream::takes_batch(size_t measured) const {
  auto it =
      std::lower_bound(c_.takes.begin(), c_.takes.end(), measured, [](const Take& t, size_t op) { return t.op < op; });
  return it != c_.takes.end() && it->op == measured;
}

// The step's ops with its micro-step made c_.repeat times (accumulate(), replay_graph.h); ops outside the step (the
// time before it) once.
void OpStream::repeat_micro_steps() {
  const std::vector<Op>& m = measured_;
  auto push = [&](size_t q, uint8_t micro, bool copy) {
    Op o = m[q];
    if (copy) {
      o.micro = micro;
      if (o.kind == OpKind::wait_data && !takes_batch(measured_first_ + q)) o.kind = OpKind::work;  // no batch
    }
    sources_.push_back(measured_first_ + q);
    ops_.push_back(o);
  };
  for (size_t i = 0; i < m.size();) {
    if (m[i].kind != OpKind::step_begin) {
      push(i++, 0, false);
      continue;
    }
    size_t end = i + 1, last_backward = i;
    while (end < m.size() && m[end].kind != OpKind::step_end) {
      if (!m[end].other && m[end].stage == Stage::backward) last_backward = end;
      ++end;
    }
    push(i, 0, false);
    for (int rep = 1; rep < c_.repeat && last_backward > i; ++rep)
      for (size_t q = i + 1; q <= last_backward; ++q) push(q, static_cast<uint8_t>(rep), true);
    for (size_t q = i + 1; q <= end && q < m.size(); ++q) push(q, 0, false);
    i = end + 1;
  }
}

bool OpStream::next() {
  measured_first_ += measured_.size();
  first_ += ops().size();
  measured_.clear();
  ops_.clear();
  sources_.clear();
  while (measured_.empty() && step_ < c_.steps->size()) make_measured((*c_.steps)[step_++]);
  if (measured_.empty()) return false;
  mark_takes();
  if (c_.repeat > 1) repeat_micro_steps();
  return true;
}

std::vector<Op> all_ops(const Chain& c) {
  std::vector<Op> out;
  OpStream s(c);
  while (s.next()) out.insert(out.end(), s.ops().begin(), s.ops().end());
  return out;
}

int64_t batch_taken_at(const Chain& c, size_t op) {
  auto it = std::lower_bound(c.batches.begin(), c.batches.end(), op, [](const Batch& b, size_t v) { return b.op < v; });
  return it != c.batches.end() && it->op == op ? it - c.batches.begin() : -1;
}

bool sets(const Op& o, const ReplayEdit& e) {
  return o.kind == OpKind::work && (e.other ? o.other : (!o.other && o.stage == e.stage));
}

// An edit's duration for the op that takes a batch, else the held-out prediction's typical one, else the measured one
// scaled by each stage edit; then its wait for a core as contention leaves it.
int64_t planned_dur(const Plan& p, size_t r, const Op& o, int64_t batch) {
  int64_t d = o.dur();
  if (batch >= 0 && p.take_dur[r][static_cast<size_t>(batch)] != kAsMeasured) {
    d = p.take_dur[r][static_cast<size_t>(batch)];
  } else if (p.typical_ops && batch < 0 && (o.kind == OpKind::work || o.kind == OpKind::wait_data)) {
    auto it = p.typical[r].find(key_of(o));
    d = it == p.typical[r].end() ? 0 : it->second;
  } else {
    for (const StageScale& s : p.scales[r]) {
      if (!sets(o, s.edit)) continue;
      auto it = s.steps.find(o.step);
      const auto [median, mine] = it == s.steps.end() ? std::pair<double, double>{0, 0} : it->second;
      if (mine > 0) d = static_cast<int64_t>(std::llround(static_cast<double>(o.dur()) * median / mine));
    }
  }
  if (r < p.rewait.size() && p.rewait[r].on) d = rewaited(p.rewait[r], o.cpu, o.wait, o.dur(), d);
  return d;
}

}  // namespace ddp::replay_graph
