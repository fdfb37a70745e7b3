// The first optimizer step after which two runs' parameter hashes differ.
#include <map>

#include "traces/diff/run_diff_steps.h"

namespace ddp::run_diff_detail {

ReplicaDiff diff_replicas(const DiffRun& a, const DiffRun& b) {
  ReplicaDiff out;
  if (a.replicas.empty() || b.replicas.empty()) {
    out.note = a.replicas.empty() && b.replicas.empty() ? "neither run has replica hashes (run with --verify-steps N)"
               : a.replicas.empty()                     ? "run A has no replica hashes"
                                                        : "run B has no replica hashes";
    return out;
  }
  for (const auto& [rank, ra] : a.replicas) {
    auto ib = b.replicas.find(rank);
    if (ib == b.replicas.end()) continue;
    out.compared = true;
    std::map<int64_t, std::string> hb;
    for (const auto& r : ib->second) hb.emplace(r.step, r.hash);
    std::map<int64_t, std::string> ha;
    for (const auto& r : ra) ha.emplace(r.step, r.hash);
    ReplicaDifference rd;
    rd.rank = rank;
    for (const auto& [step, h] : ha) {  // std::map: ascending steps, -1 (after the broadcast) first
      auto it = hb.find(step);
      if (it == hb.end()) continue;
      rd.compared++;
      if (h != it->second && !rd.first_step) {
        rd.first_step = step;
        rd.hash_a = h;
        rd.hash_b = it->second;
      }
    }
    if (rd.first_step && (!out.first_step || *rd.first_step < *out.first_step)) out.first_step = rd.first_step;
    out.ranks.push_back(rd);
  }
  if (!out.compared) out.note = "the runs have replica hashes of different ranks";
  return out;
}

}  // namespace ddp::run_diff_detail
