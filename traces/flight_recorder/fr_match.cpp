// Matching collectives across ranks by (process group, sequence id): torch numbers each group's collectives from 1 on
// every member, so the same id on two ranks is meant to be the same collective. A rank whose ids stop early never
// joined the next one; equal ids with different ops mean a rank skipped or added one before.
#include "traces/flight_recorder/fr_match.h"

#include <algorithm>
#include <set>

#include "traces/base/rank_set.h"

namespace ddp {
namespace {

// Ops whose inputs are the same shape on every rank of a group; the others (all_to_all, gather, scatter, ...) may
// differ by design and are compared by op and dtype only.
bool same_sizes_by_contract(const std::string& op) {
  static const std::set<std::string> ops = {"all_reduce",
                                            "allreduce",
                                            "broadcast",
                                            "reduce",
                                            "all_gather",
                                            "allgather",
                                            "_allgather_base",
                                            "all_gather_into_tensor",
                                            "reduce_scatter",
                                            "_reduce_scatter_base",
                                            "reduce_scatter_tensor",
                                            "allreduce_coalesced",
                                            "all_reduce_coalesced",
                                            "barrier"};
  return ops.count(op) > 0;
}

std::string key_of(const FrEntry& e, FrMismatchKind k) {
  switch (k) {
    case FrMismatchKind::op:
      return e.op;
    case FrMismatchKind::sizes: {
      std::string t;
      for (const auto& s : e.input_sizes) t += describe_fr_shape(s);
      return t;
    }
    case FrMismatchKind::dtypes: {
      std::string t;
      for (const auto& d : e.input_dtypes) t += d + ",";
      return t;
    }
  }
  return {};
}

// The entries at one sequence id grouped by what `kind` compares; the largest group first.
std::vector<FrVariant> variants_of(const std::map<int, const FrEntry*>& at, FrMismatchKind kind) {
  std::map<std::string, FrVariant> by;
  for (const auto& [rank, e] : at) {
    FrVariant& v = by[key_of(*e, kind)];
    if (v.ranks.empty()) v.entry = *e;
    v.ranks.push_back(rank);
  }
  std::vector<FrVariant> out;
  for (auto& [k, v] : by) out.push_back(std::move(v));
  std::stable_sort(out.begin(), out.end(),
                   [](const FrVariant& a, const FrVariant& b) { return a.ranks.size() > b.ranks.size(); });
  return out;
}

struct RankEntries {
  std::map<int64_t, const FrEntry*> by_seq;
  const FrDump* dump = nullptr;
};

std::vector<int> members_of(const std::string& id, const std::vector<FrDump>& dumps,
                            const std::map<int, RankEntries>& holding) {
  std::set<int> m;
  for (const FrDump& d : dumps) {
    auto g = d.groups.find(id);
    if (g != d.groups.end()) m.insert(g->second.ranks.begin(), g->second.ranks.end());
  }
  if (m.empty())
    for (const auto& [r, e] : holding) m.insert(r);
  return {m.begin(), m.end()};
}

void compare_window(FrGroupVerdict& g, const std::map<int, RankEntries>& ranks) {
  g.common_first = 0;
  g.common_last = INT64_MAX;
  for (const auto& [r, re] : ranks) {
    g.common_first = std::max(g.common_first, re.by_seq.empty() ? 0 : re.by_seq.begin()->first);
    g.common_last = std::min(g.common_last, re.by_seq.empty() ? 0 : re.by_seq.rbegin()->first);
  }
  for (int64_t seq = std::max<int64_t>(g.common_first, 1); seq <= g.common_last; ++seq) {
    std::map<int, const FrEntry*> at;
    for (const auto& [r, re] : ranks) {
      auto it = re.by_seq.find(seq);
      if (it != re.by_seq.end()) at[r] = it->second;
    }
    if (at.size() != ranks.size()) continue;  // a hole in a ring buffer: nothing to compare
    ++g.compared;
    for (FrMismatchKind kind : {FrMismatchKind::op, FrMismatchKind::sizes, FrMismatchKind::dtypes}) {
      if (kind == FrMismatchKind::sizes && !same_sizes_by_contract(at.begin()->second->op)) continue;
      std::vector<FrVariant> v = variants_of(at, kind);
      if (v.size() < 2) continue;
      if (g.mismatches.size() < kFrMismatchesKept) g.mismatches.push_back({kind, seq, std::move(v)});
      break;  // one disagreement per collective: a different op makes its sizes incomparable
    }
  }
}

void find_parting(FrGroupVerdict& g, const std::map<int, RankEntries>& ranks) {
  int64_t lo = INT64_MAX, hi = 0;
  for (const auto& [r, re] : ranks) {
    const int64_t last = re.by_seq.empty() ? 0 : re.by_seq.rbegin()->first;
    lo = std::min(lo, last);
    hi = std::max(hi, last);
    FrLast l{r, !re.by_seq.empty(), {}, FrDone::unknown};
    if (l.any) {
      l.entry = *re.by_seq.rbegin()->second;
      l.done = fr_entry_done(*re.by_seq.rbegin()->second, *re.dump);
    }
    g.last.push_back(l);
  }
  if (ranks.empty()) return;
  if (hi > lo) {
    g.parted_seq = lo + 1;
    std::map<int, const FrEntry*> at;
    for (const auto& [r, re] : ranks) {
      auto it = re.by_seq.find(g.parted_seq);
      if (it != re.by_seq.end()) at[r] = it->second;
    }
    if (!at.empty()) g.parted = variants_of(at, FrMismatchKind::sizes).front();
    for (const FrLast& l : g.last)
      if ((l.any ? l.entry.collective_seq : 0) < g.parted_seq) g.never_joined.push_back(l.rank);
    return;
  }
  for (const FrLast& l : g.last)
    if (l.any && l.done == FrDone::no) g.stuck_inside.push_back(l.rank);
}

std::string group_text(const FrGroupVerdict& g) { return describe_fr_group(g.id, g.desc); }

std::string last_text(const FrGroupVerdict& g, int rank) {
  for (const FrLast& l : g.last)
    if (l.rank == rank) return l.any ? describe_fr_entry(l.entry) + ", " + fr_done_text(l.done) : "none in this group";
  return "no dump";
}

std::string variant_list(const std::vector<FrVariant>& vs, int world) {
  std::string t;
  for (size_t k = 0; k < vs.size() && k < 3; ++k)
    t += (k ? "; " : "") + describe_ranks(vs[k].ranks, world) + ": " + describe_fr_entry(vs[k].entry);
  if (vs.size() > 3) t += "; " + std::to_string(vs.size() - 3) + " more variants";
  return t;
}

std::string mismatch_sentence(const FrGroupVerdict& g, const FrMismatch& m, int world) {
  std::string t = "at #" + std::to_string(m.seq) + " of " + group_text(g) + " the ranks disagree on the " +
                  fr_mismatch_name(m.kind) + " (" + variant_list(m.variants, world) + ")";
  if (m.kind == FrMismatchKind::op)
    t += ": a rank skipped or added a collective before it (an `if rank == ...` around one)";
  else if (m.kind == FrMismatchKind::sizes)
    t += ": tensors shaped per rank, or a rank that skipped or added a collective before it";
  return t;
}

// The sentence a user reads first. A disagreement at or before where the ranks part or wait is the likelier cause,
// so it leads; the parting or the wait follows.
std::string headline_of(const FrGroupVerdict& g, int world) {
  std::string where;
  if (g.parted_seq >= 0) {
    where = "the ranks part at " + describe_fr_entry(g.parted.entry) + " of " + group_text(g) + ": " +
            describe_ranks(g.never_joined, world) + " never joined it";
    if (g.never_joined.size() == 1) where += " (its last: " + last_text(g, g.never_joined.front()) + ")";
  } else if (!g.stuck_inside.empty()) {
    where = "every rank of " + group_text(g) + " joined #" + std::to_string(g.last.front().entry.collective_seq) +
            " and " + describe_ranks(g.stuck_inside, world) +
            (g.stuck_inside.size() == 1 ? " still waits" : " still wait") + " in it";
  }
  const int64_t until = g.parted_seq >= 0 ? g.parted_seq : INT64_MAX;
  if (!g.mismatches.empty() && g.mismatches.front().seq <= until) {
    const std::string m = mismatch_sentence(g, g.mismatches.front(), world);
    return where.empty() ? m : m + "; then " + where;
  }
  if (!where.empty() && g.parted_seq < 0)
    where += ": all joined, so the wait is in the transport or a device, not a missing rank";
  return where;
}

}  // namespace

const char* fr_done_text(FrDone d) {
  switch (d) {
    case FrDone::yes:
      return "completed";
    case FrDone::no:
      return "pending";
    case FrDone::ended:
      return "ended (completed or failed)";
    case FrDone::unknown:
      return "completion not recorded";
  }
  return "?";
}

FrDone fr_entry_done(const FrEntry& e, const FrDump& dump) {
  if (e.state == "completed" || e.completed_ns > 0) return FrDone::yes;
  if (e.backend == "gloo") return e.retired ? FrDone::ended : FrDone::no;  // see FrDone
  if (e.state == "started" || e.started_ns > 0) return FrDone::no;
  auto st = dump.status.find(e.group);
  if (st != dump.status.end() && st->second.last_completed >= 0)
    return e.collective_seq <= st->second.last_completed ? FrDone::yes : FrDone::no;
  return FrDone::unknown;
}

std::string describe_fr_shape(const std::vector<int64_t>& dims) {
  std::string t = "[";
  for (size_t k = 0; k < dims.size(); ++k) t += (k ? ", " : "") + std::to_string(dims[k]);
  return t + "]";
}

std::string describe_fr_group(const std::string& id, const std::string& desc) {
  return "group " + id + (desc.empty() ? std::string() : " (" + desc + ")");
}

const char* fr_mismatch_name(FrMismatchKind k) {
  switch (k) {
    case FrMismatchKind::op:
      return "op";
    case FrMismatchKind::sizes:
      return "sizes";
    case FrMismatchKind::dtypes:
      return "dtypes";
  }
  return "?";
}

std::string describe_fr_entry(const FrEntry& e) {
  std::string t = e.op + " #" + std::to_string(e.is_p2p ? e.p2p_seq : e.collective_seq);
  std::string sizes;
  for (const auto& s : e.input_sizes) sizes += (sizes.empty() ? "" : ", ") + describe_fr_shape(s);
  if (!sizes.empty()) t += " " + sizes;
  std::vector<std::string> dtypes = e.input_dtypes;
  std::sort(dtypes.begin(), dtypes.end());
  dtypes.erase(std::unique(dtypes.begin(), dtypes.end()), dtypes.end());
  for (const auto& d : dtypes) t += " " + d;
  return t;
}

FrVerdict match_fr_dumps(const std::vector<FrDump>& dumps) {
  FrVerdict v;
  std::set<std::string> ids;
  std::map<std::string, std::string> desc;
  for (const FrDump& d : dumps) {
    v.ranks.push_back(d.rank);
    v.world = std::max(v.world, d.rank + 1);
    for (const FrEntry& e : d.entries) {
      ids.insert(e.group);
      if (!e.group_name.empty()) desc[e.group] = e.group_name;
    }
    for (const auto& [id, g] : d.groups) {
      ids.insert(id);
      for (int r : g.ranks) v.world = std::max(v.world, r + 1);
      if (desc[id].empty()) desc[id] = g.desc;
    }
  }
  for (const std::string& id : ids) {
    FrGroupVerdict g;
    g.id = id;
    g.desc = desc[id];
    std::map<int, RankEntries> holding;
    for (const FrDump& d : dumps)
      for (const FrEntry& e : d.entries)
        if (e.group == id) {
          if (e.is_p2p) {
            ++g.p2p;
            continue;
          }
          RankEntries& re = holding[d.rank];
          re.dump = &d;
          re.by_seq[e.collective_seq] = &e;  // a repeated id (coalesced ops) keeps the last
        }
    g.members = members_of(id, dumps, holding);
    std::map<int, RankEntries> ranks;  // dumped members, with or without entries of this group
    for (int r : g.members) {
      auto d = std::find_if(dumps.begin(), dumps.end(), [&](const FrDump& x) { return x.rank == r; });
      if (d == dumps.end()) {
        g.without_dump.push_back(r);
        continue;
      }
      RankEntries& re = ranks[r];
      re.dump = &*d;
      if (holding.count(r)) re.by_seq = holding[r].by_seq;
    }
    if (ranks.empty()) continue;
    compare_window(g, ranks);
    find_parting(g, ranks);
    v.groups.push_back(std::move(g));
  }
  // The default group ("0") first, then by id as numbers.
  std::stable_sort(v.groups.begin(), v.groups.end(), [](const FrGroupVerdict& a, const FrGroupVerdict& b) {
    return a.id.size() != b.id.size() ? a.id.size() < b.id.size() : a.id < b.id;
  });
  for (const FrGroupVerdict& g : v.groups) {
    const std::string h = headline_of(g, v.world);
    if (h.empty()) continue;
    v.consistent = false;
    if (v.headline.empty()) v.headline = h;
  }
  if (v.consistent) {
    int64_t compared = 0;
    for (const FrGroupVerdict& g : v.groups) compared += g.compared;
    v.headline = "the " + std::to_string(v.ranks.size()) + " dumps agree: every rank's last collective is the same, " +
                 std::to_string(compared) + " collectives compared without a mismatch";
  }
  return v;
}

}  // namespace ddp
