#include "runtime/check/tensor_growth.h"

#include <algorithm>

namespace ddp {
namespace {

// Never falls, and rises by at least one a census.
bool grows(const std::vector<int64_t>& v) {
  if (v.size() < kCensusMin) return false;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] < v[i - 1]) return false;
  return v.back() - v.front() >= static_cast<int64_t>(v.size() - 1);
}

const records::tensor_holder* by_id(const records::tensor_census& c, int64_t id) {
  for (const auto& h : c.holders)
    if (h.id == id) return &h;
  return nullptr;
}

// What grew: the container of the last census that gained the most tensors since the first (matched by identity;
// one first seen later counts from zero), else, when graphs grow, the largest graph (held by a new tensor each step
// where a loss is accumulated: matched by kind).
void name_the_holder(TensorGrowth& g) {
  int64_t best = 0;
  for (const auto& h : g.last.holders) {
    if (h.kind == "graph") continue;
    const records::tensor_holder* was = by_id(g.first, h.id);
    const int64_t from = was && was->kind == h.kind ? was->count : 0;
    if (h.count - from > best) {
      best = h.count - from;
      g.holder_kind = h.kind, g.holder_name = h.name, g.holder_from = from, g.holder_to = h.count;
    }
  }
  if (best > 0 || !g.graph_grows) return;
  auto graph = [](const records::tensor_census& c) -> const records::tensor_holder* {
    for (const auto& h : c.holders)
      if (h.kind == "graph") return &h;
    return nullptr;
  };
  if (const records::tensor_holder* last = graph(g.last)) {
    const records::tensor_holder* was = graph(g.first);
    g.holder_kind = "graph", g.holder_name = last->name, g.holder_to = last->count;
    g.holder_from = was ? was->count : 0;
  }
}

}  // namespace

TensorGrowth tensor_growth(const std::vector<TrainingStep>& steps, int64_t warm) {
  TensorGrowth g;
  std::vector<const TrainingStep*> taken;
  for (const TrainingStep& t : steps)
    if (t.census && t.step >= warm) taken.push_back(&t);
  g.censuses = taken.size();
  if (taken.empty()) return g;
  std::vector<int64_t> tensors, nodes;
  for (const TrainingStep* t : taken) {
    tensors.push_back(t->census->tensors);
    nodes.push_back(t->census->graph_nodes);
  }
  g.first = *taken.front()->census, g.last = *taken.back()->census;
  g.from_step = taken.front()->step, g.to_step = taken.back()->step;
  g.from_epoch = g.first.epoch;
  g.graph_grows = grows(nodes);
  g.tensors_grow = grows(tensors);
  g.across_epochs = g.grows() && g.last.epoch > g.first.epoch;
  if (g.grows()) name_the_holder(g);
  return g;
}

}  // namespace ddp
