// The replayed run as traces (replay_run.h PredictedRun): only a replay asked for them (keep_trace) writes any.
#include <algorithm>
#include <cmath>
#include <string>

#include "traces/replay/replay_run.h"

namespace ddp::replay_graph {
namespace {

Event& add_span(RankTrace& t, Stage s, uint8_t lane, int64_t a, int64_t b, uint32_t step, uint8_t micro) {
  t.events.push_back(make_span(s, lane, a, std::max(a, b)));
  t.events.back().step = step;
  t.events.back().micro = micro;
  return t.events.back();
}

void add_buckets(RankTrace& t, const std::vector<Launch>& launches,
                 const std::vector<std::pair<int64_t, int64_t>>& tl) {
  for (size_t li = 0; li < launches.size(); ++li) {
    const Launch& l = launches[li];
    const auto [a, b] = tl[li];
    if (b < a) continue;  // its sync was never waited for (a trace cut short)
    Event& e =
        add_span(t, Stage::allreduce, 1, a, b, static_cast<uint32_t>(l.key >> 24), static_cast<uint8_t>(l.key >> 16));
    e.bucket = static_cast<uint16_t>(l.key & 0xFFFF);
    e.value = l.bytes;
  }
}

// Each batch on the worker that made it: a worker's batches follow each other (Plan::prev), a batch with none before
// it starts a worker of its own.
void add_batches(RankTrace& t, const Chain& c, const Plan& p, size_t r,
                 const std::vector<std::pair<int64_t, int64_t>>& fetches) {
  std::vector<int> worker(c.batches.size(), -1);
  int workers = 0;
  const Stage order[] = {Stage::disk_read, Stage::transform, Stage::collate, Stage::pin};
  for (size_t bi = 0; bi < c.batches.size(); ++bi) {
    const Batch& b = c.batches[bi];
    const uint32_t step = static_cast<uint32_t>(b.sync >> 8);  // the step and micro-step of the op that takes it
    const uint8_t micro = static_cast<uint8_t>(b.sync & 0xFF);
    const int64_t prev = p.prev[r][bi];
    worker[bi] = prev >= 0 ? worker[static_cast<size_t>(prev)] : workers++;
    uint8_t lane = 0;
    if (p.waits_for[r][bi]) {
      const std::string name = "loader/" + std::to_string(worker[bi]);
      auto at = std::find(t.lanes.begin(), t.lanes.end(), name);
      if (at == t.lanes.end() && t.lanes.size() < 255) at = t.lanes.insert(t.lanes.end(), name);
      lane = at == t.lanes.end() ? 0 : static_cast<uint8_t>(at - t.lanes.begin());  // past 253 workers: main's
    }
    const auto [a, z] = fetches[bi];
    const double measured = static_cast<double>(spent(b));
    const double scale = measured > 0 ? static_cast<double>(z - a) / measured : 0;
    int64_t cursor = a;
    for (Stage s : order) {
      auto it = b.stages.find(s);
      if (it == b.stages.end()) continue;
      const int64_t end = cursor + std::llround(static_cast<double>(it->second) * scale);
      Event& e = add_span(t, s, lane, cursor, end, step, micro);
      e.item = static_cast<uint32_t>(bi);
      e.epoch = b.pass;
      cursor = end;
    }
  }
}

}  // namespace

PredictedRun::PredictedRun(const std::vector<RankData>& data, int world)
    : traces_(data.size()), step_begin_(data.size(), 0) {
  for (size_t r = 0; r < data.size(); ++r) {
    RankTrace& t = traces_[r];
    t.rank = static_cast<uint32_t>(data[r].rank);
    t.world = static_cast<uint32_t>(world);
    t.complete = true;
    t.lanes = {"main", "comm"};
    if (data[r].trace && data[r].trace->meta.count("host")) t.meta["host"] = data[r].trace->meta.at("host");
  }
}

void PredictedRun::op(size_t r, const Op& o, int64_t a, int64_t b) {
  if (o.kind == OpKind::step_begin) step_begin_[r] = a;
  if (o.kind == OpKind::step_end) add_span(traces_[r], Stage::step, 0, step_begin_[r], a, o.step, 0);
  if (o.kind == OpKind::step_begin || o.kind == OpKind::step_end || o.other || b <= a) return;
  add_span(traces_[r], o.stage, 0, a, b, o.step, o.micro);
}

std::vector<RankTrace> PredictedRun::finish(const std::vector<Chain>& chains, const Plan& p, const Timeline& tl) {
  for (size_t r = 0; r < traces_.size(); ++r) {
    RankTrace& t = traces_[r];
    add_buckets(t, p.launches[r], tl.buckets[r]);
    add_batches(t, chains[r], p, r, tl.fetches[r]);
    std::stable_sort(t.events.begin(), t.events.end(), [](const Event& x, const Event& y) { return x.t0 < y.t0; });
  }
  return std::move(traces_);
}

}  // namespace ddp::replay_graph
