#include "traces/timeline/rank_overview.h"

#include <algorithm>
#include <array>
#include <map>

#include "traces/base/stats.h"

namespace ddp {
namespace {

// One rank's steps (extent over its processes) and, per step, the time of each main-thread stage.
struct RankSteps {
  size_t first_process = 0;
  std::map<uint32_t, std::pair<int64_t, int64_t>> extent;  // step -> [t0, t1]
  std::vector<uint32_t> ids;                               // extent's keys, ascending, once extents are known
  std::vector<int64_t> t0s, t1s;                           // their extents, for the lookup by time
  std::vector<std::array<int64_t, kStageCount>> stage_ns;  // per step, per stage
};

// The columns: a rank per column, in the order its first process is drawn.
std::vector<RankSteps> group_by_rank(const Timeline& tl, std::vector<int>& ranks) {
  std::map<int, size_t> column;
  std::vector<RankSteps> out;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const Process& p = tl.processes[pi];
    if (p.span_count == 0) continue;
    const int rank = p.rank >= 0 ? p.rank : -1 - static_cast<int>(pi);
    auto [it, fresh] = column.try_emplace(rank, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().first_process = pi;
      ranks.push_back(rank);
    }
    for (const StepMark& m : p.steps) {
      auto [e, first] = out[it->second].extent.try_emplace(m.step, m.t0, m.t1);
      if (!first) e->second = {std::min(e->second.first, m.t0), std::max(e->second.second, m.t1)};
    }
  }
  return out;
}

// Adds every main-thread stage span of the rank's processes to the step whose time holds its start.
void add_stage_time(const Timeline& tl, const std::vector<int>& ranks, std::vector<RankSteps>& cols) {
  std::map<int, size_t> column;
  for (size_t c = 0; c < ranks.size(); ++c) column[ranks[c]] = c;
  for (RankSteps& r : cols) {
    for (const auto& [id, ext] : r.extent) r.ids.push_back(id), r.t0s.push_back(ext.first), r.t1s.push_back(ext.second);
    r.stage_ns.assign(r.ids.size(), {});
  }
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const Process& p = tl.processes[pi];
    if (p.span_count == 0) continue;
    RankSteps& r = cols[column[p.rank >= 0 ? p.rank : -1 - static_cast<int>(pi)]];
    if (r.ids.empty()) continue;
    // Steps are in id order; their starts normally are too, but a lookup by time needs them sorted.
    if (!std::is_sorted(r.t0s.begin(), r.t0s.end())) continue;
    for (const Lane& lane : p.lanes)
      for (const Row& row : lane.rows)
        for (const Span& s : row.spans) {
          if (!s.has_stage() || s.stage == static_cast<uint8_t>(Stage::step) ||
              !stage_has(static_cast<Stage>(s.stage), kStageMainThread))
            continue;
          auto it = std::upper_bound(r.t0s.begin(), r.t0s.end(), s.t0);
          if (it == r.t0s.begin()) continue;
          const size_t i = static_cast<size_t>(it - r.t0s.begin()) - 1;
          if (s.t0 < r.t1s[i]) r.stage_ns[i][s.stage] += s.duration();
        }
  }
}

OverviewCell cell_of(const RankSteps& r, size_t i) {
  OverviewCell c;
  c.present = true;
  c.step_ns = r.t1s[i] - r.t0s[i];
  const auto& ns = r.stage_ns[i];
  c.own_ns = std::max<int64_t>(0, c.step_ns - ns[static_cast<size_t>(Stage::wait_comm)]);
  int64_t best = 0;
  for (size_t s = 0; s < ns.size(); ++s)
    if (ns[s] > best) best = ns[s], c.dominant = static_cast<uint8_t>(s);
  return c;
}

}  // namespace

RankOverview build_rank_overview(const Timeline& tl) {
  RankOverview o;
  std::vector<RankSteps> cols = group_by_rank(tl, o.ranks);
  add_stage_time(tl, o.ranks, cols);
  std::map<uint32_t, std::pair<int64_t, int64_t>> steps;
  for (const RankSteps& r : cols) {
    o.process.push_back(r.first_process);
    for (const auto& [id, ext] : r.extent) {
      auto [e, first] = steps.try_emplace(id, ext);
      if (!first) e->second = {std::min(e->second.first, ext.first), std::max(e->second.second, ext.second)};
    }
  }
  for (const auto& [id, ext] : steps) {
    o.steps.push_back(id);
    o.step_t0.push_back(ext.first);
    o.step_t1.push_back(ext.second);
  }
  o.cells.assign(o.steps.size() * o.ranks.size(), OverviewCell{});
  for (size_t c = 0; c < cols.size(); ++c)
    for (size_t i = 0; i < cols[c].ids.size(); ++i) {
      const size_t row =
          static_cast<size_t>(std::lower_bound(o.steps.begin(), o.steps.end(), cols[c].ids[i]) - o.steps.begin());
      o.cells[row * o.ranks.size() + c] = cell_of(cols[c], i);
    }
  // Each cell against the median rank of its step.
  std::vector<double> own;
  for (size_t row = 0; row < o.steps.size(); ++row) {
    own.clear();
    for (size_t c = 0; c < o.ranks.size(); ++c)
      if (o.at(row, c).present) own.push_back(static_cast<double>(o.at(row, c).own_ns));
    const double mid = median(own);
    for (size_t c = 0; c < o.ranks.size(); ++c) {
      OverviewCell& cell = o.cells[row * o.ranks.size() + c];
      if (cell.present) cell.score = mid > 0 ? static_cast<float>(static_cast<double>(cell.own_ns) / mid) : 1.0f;
    }
  }
  return o;
}

}  // namespace ddp
