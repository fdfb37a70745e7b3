#include "traces/kineto/kineto_cycles.h"

#include <algorithm>
#include <limits>
#include <map>

#include "traces/base/text_format.h"

namespace ddp::kineto_detail {
namespace {

struct Range {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  uint32_t first_step = std::numeric_limits<uint32_t>::max(), last_step = 0;
  bool empty() const { return lo > hi; }
};

Range range_of(const KFile& f) {
  Range r;
  for (const KSpan& s : f.spans) {
    r.lo = std::min(r.lo, s.t0);
    r.hi = std::max(r.hi, s.t1);
    if (s.stage == Stage::step) {
      r.first_step = std::min(r.first_step, s.step);
      r.last_step = std::max(r.last_step, s.step);
    }
  }
  return r;
}

// Ranks of one job profile the same steps at nearly the same time; clocks of different hosts differ by far less than
// this slack, two jobs' cycles by far more.
constexpr int64_t kPairSlackNs = 2'000'000'000;

bool overlaps(const Range& a, const Range& b) { return a.lo <= b.hi + kPairSlackNs && b.lo <= a.hi + kPairSlackNs; }

std::string steps_text(const Range& r) {
  if (r.first_step > r.last_step) return "no ProfilerStep";
  return r.first_step == r.last_step ? std::to_string(r.first_step)
                                     : std::to_string(r.first_step) + "-" + std::to_string(r.last_step);
}

// One rank's cycles as one file: spans in time order, thread and CUDA-name indices remapped onto merged tables.
KFile merge(std::vector<KFile*>& parts) {
  KFile m;
  const KFile& first = *parts.front();
  m.path = first.path;
  m.name = first.name;
  m.rank = first.rank;
  m.world = first.world;
  m.rank_from = first.rank_from;
  m.backend = first.backend;
  m.base_ns = first.base_ns;
  m.array_format = first.array_format;
  m.schema_version = first.schema_version;
  m.digest = first.digest;
  std::map<std::string, uint16_t> thread_index;
  std::map<std::string, uint32_t> name_index;
  std::map<std::string, uint16_t> group_index{{"", 0}};  // m.process_groups starts as {""}: 0 is "not said"
  for (KFile* p : parts) {
    m.events += p->events;
    m.negative_durations += p->negative_durations;
    if (p == parts.back()) m.cut_off = p->cut_off;  // only the last cycle's file can be cut off by a killed job
    for (KSpan s : p->spans) {
      if (s.thread < p->threads.size()) {
        auto [it, fresh] = thread_index.emplace(p->threads[s.thread], static_cast<uint16_t>(m.threads.size()));
        if (fresh) m.threads.push_back(it->first);
        s.thread = it->second;
      }
      if (s.name < p->names.size()) {
        auto [it, fresh] = name_index.emplace(p->names[s.name], static_cast<uint32_t>(m.names.size()));
        if (fresh) m.names.push_back(it->first);
        s.name = it->second;
      }
      // Each file numbers its own process groups: a span keeps its group's name, not another file's number.
      if (s.pg < p->process_groups.size()) {
        const auto next = static_cast<uint16_t>(m.process_groups.size());
        auto [it, fresh] = group_index.emplace(p->process_groups[s.pg], next);
        if (fresh) m.process_groups.push_back(it->first);
        s.pg = it->second;
      } else {
        s.pg = 0;
      }
      m.spans.push_back(std::move(s));
    }
  }
  std::stable_sort(m.spans.begin(), m.spans.end(), [](const KSpan& a, const KSpan& b) { return a.t0 < b.t0; });
  return m;
}
}  // namespace

bool group_cycles(std::vector<KFile>& files, int cycle, nlohmann::json& report, std::string& summary,
                  std::string& error) {
  report = nlohmann::json::array();
  summary.clear();
  std::map<int, std::vector<KFile*>> by_rank;
  for (KFile& f : files)
    if (f.status.ok() && f.rank >= 0) by_rank[f.rank].push_back(&f);
  if (by_rank.empty()) return true;
  size_t most = 0;
  for (auto& [rank, fs] : by_rank) most = std::max(most, fs.size());
  if (most == 1 && cycle <= 1) return true;  // one file per rank: nothing to group (today's common case)

  // The reference rank's files, in time order, are the cycles; every other file joins the one it overlaps.
  auto& ref = by_rank.begin()->second;
  std::vector<Range> cycles;
  std::stable_sort(ref.begin(), ref.end(), [](KFile* a, KFile* b) { return range_of(*a).lo < range_of(*b).lo; });
  for (KFile* f : ref) cycles.push_back(range_of(*f));
  std::vector<std::map<int, std::vector<KFile*>>> members(cycles.size());
  for (auto& [rank, fs] : by_rank) {
    std::stable_sort(fs.begin(), fs.end(), [](KFile* a, KFile* b) { return range_of(*a).lo < range_of(*b).lo; });
    // One process profiles one cycle after another: two files of a rank that overlap in time are not two cycles
    // (a copy, or two jobs).
    for (size_t i = 1; i < fs.size(); ++i)
      if (range_of(*fs[i]).lo < range_of(*fs[i - 1]).hi) {
        error = "two traces claim rank " + std::to_string(rank) + " for the same time: " + fs[i - 1]->path + " and " +
                fs[i]->path;
        return false;
      }
    for (size_t i = 0; i < fs.size(); ++i) {
      const Range r = range_of(*fs[i]);
      // As many files as the reference rank: the i-th is cycle i (cycles a few steps apart overlap within the slack).
      // Otherwise (a cycle lost to damage) the cycle it overlaps most.
      size_t hit = cycles.size();
      if (fs.size() == cycles.size()) {
        if (overlaps(r, cycles[i])) hit = i;
      } else {
        int64_t best = std::numeric_limits<int64_t>::min();
        for (size_t c = 0; c < cycles.size(); ++c) {
          const int64_t common = std::min(r.hi, cycles[c].hi) - std::max(r.lo, cycles[c].lo);
          if (overlaps(r, cycles[c]) && common > best) best = common, hit = c;
        }
      }
      if (hit == cycles.size()) {
        error = fs[i]->path + " does not pair with any profiling cycle of rank " +
                std::to_string(by_rank.begin()->first) + " (its time range overlaps none of " +
                std::to_string(cycles.size()) + " files): traces of two different jobs in one folder?";
        return false;
      }
      if (!members[hit][rank].empty()) {
        error = "two traces of rank " + std::to_string(rank) + " pair with profiling cycle " + std::to_string(hit + 1) +
                ": " + members[hit][rank].front()->path + " and " + fs[i]->path;
        return false;
      }
      members[hit][rank].push_back(fs[i]);
    }
  }
  if (cycle > static_cast<int>(cycles.size())) {
    error = "--cycle " + std::to_string(cycle) + ": the traces hold " + std::to_string(cycles.size()) +
            " profiling cycle(s)";
    return false;
  }
  std::vector<std::string> steps;
  for (size_t c = 0; c < cycles.size(); ++c) {
    nlohmann::json fs = nlohmann::json::array();
    for (auto& [rank, v] : members[c])
      for (KFile* f : v)
        fs.push_back({{"rank", rank},
                      {"file", f->path},
                      {"events", f->events},
                      {"base_ns", f->base_ns},
                      {"cut_off", f->cut_off.error != ChromeError::none}});
    report.push_back({{"cycle", c + 1},
                      {"steps", steps_text(cycles[c])},
                      {"files", fs},
                      {"selected", cycle <= 0 || cycle == static_cast<int>(c + 1)}});
    steps.push_back(steps_text(cycles[c]));
  }
  size_t readable = 0;
  for (auto& [rank, fs] : by_rank) readable += fs.size();
  std::string list;
  for (size_t i = 0; i < steps.size(); ++i) list += (i == 0 ? "" : i + 1 == steps.size() ? " and " : ", ") + steps[i];
  summary = fmt("%zu files: %zu cycle%s x %zu ranks, steps %s", readable, cycles.size(), cycles.size() == 1 ? "" : "s",
                by_rank.size(), list.c_str());
  if (cycle > 0) summary += fmt("; cycle %d analysed (--cycle)", cycle);

  // Each rank's selected cycles merged into one file, in place of its per-cycle files.
  std::vector<KFile> out;
  for (KFile& f : files)
    if (!f.status.ok() || f.rank < 0) out.push_back(std::move(f));
  std::map<int, std::vector<KFile*>> chosen;
  for (size_t c = 0; c < cycles.size(); ++c)
    if (cycle <= 0 || cycle == static_cast<int>(c + 1))
      for (auto& [rank, v] : members[c]) chosen[rank].insert(chosen[rank].end(), v.begin(), v.end());
  std::vector<KFile> merged;
  for (auto& [rank, v] : chosen) merged.push_back(merge(v));
  for (KFile& m : merged) out.push_back(std::move(m));
  files = std::move(out);
  return true;
}

}  // namespace ddp::kineto_detail
