#include "runtime/check/tensor_growth.h"

#include <algorithm>
#include <cstdint>

namespace ddp {
namespace {

// Never falls, and rises between at least half of the censuses (two at least): a one-time rise (the state a
// script keeps after its checkpoint's save, a cache filled once) rises once, a leak at every step or pass rises
// at every census.
bool grows(const std::vector<int64_t>& v) {
  if (v.size() < kCensusMin) return false;
  size_t rises = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < v[i - 1]) return false;
    rises += v[i] > v[i - 1];
  }
  return rises >= std::max<size_t>(2, v.size() / 2);
}

const records::tensor_holder* by_id(const records::tensor_census& c, int64_t id) {
  for (const auto& h : c.holders)
    if (h.id == id) return &h;
  return nullptr;
}

// What grew: the container of the last census that gained the most tensors since the first (matched by identity;
// one first seen later counts from zero) where it holds half the live tensors' growth at least, else, when graphs
// grow, the largest graph (held by a new tensor each step where a loss is accumulated: matched by kind). A list
// that happens to hold this step's two tensors explains no growth.
void name_the_holder(TensorGrowth& g) {
  const int64_t more = g.last.tensors - g.first.tensors;
  int64_t best = more > 0 ? std::max<int64_t>(1, more / 2) - 1 : INT64_MAX;
  for (const auto& h : g.last.holders) {
    if (h.kind == "graph") continue;
    const records::tensor_holder* was = by_id(g.first, h.id);
    const int64_t from = was && was->kind == h.kind ? was->count : 0;
    if (h.count - from > best) {
      best = h.count - from;
      g.holder_kind = h.kind, g.holder_name = h.name, g.holder_from = from, g.holder_to = h.count;
    }
  }
  if (!g.holder_kind.empty() || !g.graph_grows) return;
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
  const double span = static_cast<double>(std::max<int64_t>(1, g.to_step - g.from_step));
  g.tensors_grow = grows(tensors) && static_cast<double>(g.last.tensors - g.first.tensors) / span >= kTensorsPerStep;
  g.across_epochs = g.grows() && g.last.epoch > g.first.epoch;
  if (g.grows()) name_the_holder(g);
  return g;
}

}  // namespace ddp
