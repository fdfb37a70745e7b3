// Flight Recorder dumps as a timeline: a process per rank, a lane per process group, a span per collective from its
// enqueue to the next one's on that rank and group (Gloo records no completion time; NCCL's completion ends a span
// when the dump has it), a pending last collective running to the latest enqueue in any dump. The verdict
// (fr_match.h) leads the load notes, so the parted collective is the first thing read.
#include <algorithm>
#include <map>

#include "traces/flight_recorder/fr_match.h"
#include "traces/timeline/timeline.h"

namespace ddp {
namespace {

// A completed last collective with no time of its own: drawn this long, visible at any zoom that shows its neighbours.
constexpr int64_t kUntimedLastNs = 1000;

std::string entry_text(const FrEntry& e, FrDone done) {
  std::string t = describe_fr_group(e.group, e.group_name) + "\nstate: " + fr_done_text(done);
  if (!e.output_sizes.empty()) {
    t += "\noutputs:";
    for (const auto& s : e.output_sizes) t += " " + describe_fr_shape(s);
  }
  if (!e.frame.empty()) t += "\nenqueued at " + e.frame;
  return t;
}

}  // namespace

bool timeline_from_fr_dumps(const std::vector<std::string>& inputs, Timeline& out, std::string& error) {
  std::vector<FrDump> dumps;
  if (!read_fr_dumps(inputs, dumps, error)) return false;
  const FrVerdict verdict = match_fr_dumps(dumps);
  int64_t latest = 0;
  for (const FrDump& d : dumps)
    for (const FrEntry& e : d.entries) latest = std::max(latest, e.created_ns);
  TimelineBuilder b;
  b.problem("Flight Recorder: " + verdict.headline);
  for (const FrDump& d : dumps) {
    const int p = b.process("rank" + std::to_string(d.rank));
    b.set_process_name(p, "rank " + std::to_string(d.rank) + " (Flight Recorder)");
    b.set_process_rank(p, d.rank);
    b.set_process_sort(p, d.rank);
    std::map<std::string, std::vector<const FrEntry*>> by_group;
    for (const FrEntry& e : d.entries) by_group[e.group].push_back(&e);
    for (auto& [group, entries] : by_group) {
      const int l = b.lane(p, group);
      b.set_lane_name(p, l, describe_fr_group(group, entries.front()->group_name));
      b.set_lane_sort(p, l, static_cast<int64_t>(group.size()) * 1000 + (group.empty() ? 0 : group[0]));
      std::stable_sort(entries.begin(), entries.end(),
                       [](const FrEntry* x, const FrEntry* y) { return x->created_ns < y->created_ns; });
      for (size_t k = 0; k < entries.size(); ++k) {
        const FrEntry& e = *entries[k];
        const bool last = k + 1 == entries.size();
        const FrDone done = fr_entry_done(e, d);
        int64_t t1 = last ? e.created_ns + kUntimedLastNs : entries[k + 1]->created_ns;
        if (e.completed_ns > e.created_ns) t1 = e.completed_ns;
        if (last && done == FrDone::no) t1 = std::max(latest, e.created_ns + kUntimedLastNs);
        Span s;
        s.t0 = e.created_ns;
        s.set_t1(std::max(t1, e.created_ns));
        s.name = b.intern(describe_fr_entry(e));
        if (e.op.find("all_reduce") != std::string::npos || e.op.find("allreduce") != std::string::npos)
          s.stage = static_cast<uint8_t>(Stage::allreduce);
        s.detail = b.add_detail(0, kNoBucket, b.extras().add(entry_text(e, done)));
        b.add_span(p, l, s);
      }
    }
  }
  out = b.finish();
  out.source = inputs.size() == 1 ? inputs.front() : std::to_string(inputs.size()) + " Flight Recorder dumps";
  return true;
}

}  // namespace ddp
