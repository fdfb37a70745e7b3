#include "traces/flight_recorder/fr_report.h"

#include <map>
#include <set>

#include "traces/base/rank_set.h"

namespace ddp {
namespace {

// Ranks by their last collective: one line per distinct (sequence id, completion) however many ranks share it.
void last_lines(const FrGroupVerdict& g, int world, std::string& out) {
  std::map<std::pair<int64_t, FrDone>, std::vector<int>> by;
  std::map<std::pair<int64_t, FrDone>, const FrLast*> sample;
  std::vector<int> none;
  for (const FrLast& l : g.last) {
    if (!l.any) {
      none.push_back(l.rank);
      continue;
    }
    const auto key = std::make_pair(l.entry.collective_seq, l.done);
    by[key].push_back(l.rank);
    sample[key] = &l;
  }
  for (auto it = by.rbegin(); it != by.rend(); ++it) {
    const FrLast& l = *sample[it->first];
    std::string line =
        "    " + describe_ranks(it->second, world) + ": " + describe_fr_entry(l.entry) + ", " + fr_done_text(l.done);
    if (!l.entry.frame.empty()) line += ", from " + l.entry.frame;
    out += clip(line, kReportLineMax) + "\n";
  }
  if (!none.empty())
    out += clip("    " + describe_ranks(none, world) + ": no collective of this group", kReportLineMax) + "\n";
}

void mismatch_lines(const FrGroupVerdict& g, int world, std::string& out) {
  for (const FrMismatch& m : g.mismatches) {
    std::string line = "    #" + std::to_string(m.seq) + " " + fr_mismatch_name(m.kind) + ":";
    for (size_t k = 0; k < m.variants.size() && k < 3; ++k)
      line += (k ? ";" : "") + std::string(" ") + describe_ranks(m.variants[k].ranks, world) + " " +
              describe_fr_entry(m.variants[k].entry);
    out += clip(line, kReportLineMax) + "\n";
  }
}

nlohmann::json entry_json(const FrEntry& e) {
  return {{"seq", e.is_p2p ? e.p2p_seq : e.collective_seq},
          {"op", e.op},
          {"backend", e.backend},
          {"input_sizes", e.input_sizes},
          {"input_dtypes", e.input_dtypes},
          {"output_sizes", e.output_sizes},
          {"output_dtypes", e.output_dtypes},
          {"state", e.state},
          {"frame", e.frame},
          {"time_created_ns", e.created_ns}};
}

nlohmann::json variants_json(const std::vector<FrVariant>& vs) {
  nlohmann::json a = nlohmann::json::array();
  for (const FrVariant& v : vs) a.push_back({{"ranks", v.ranks}, {"collective", entry_json(v.entry)}});
  return a;
}

}  // namespace

std::string fr_report_text(const FrVerdict& v, const std::vector<FrDump>& dumps) {
  std::set<std::string> versions, backends;
  size_t entries = 0;
  for (const FrDump& d : dumps) {
    versions.insert(d.version);
    entries += d.entries.size();
    for (const FrEntry& e : d.entries)
      if (!e.backend.empty()) backends.insert(e.backend);
  }
  std::string out = "Flight Recorder dumps: " + describe_ranks(v.ranks, v.world) + " of a world of " +
                    std::to_string(v.world) + ", " + std::to_string(entries) + " entries, format";
  for (const auto& s : versions) out += " " + s;
  for (const auto& b : backends) out += ", " + b;
  out += "\n\nverdict: " + clip(v.headline, kReportLineMax * 2) + "\n";
  for (const FrGroupVerdict& g : v.groups) {
    out += "\n" + describe_fr_group(g.id, g.desc) + ": " + describe_ranks(g.members, v.world);
    if (g.common_last >= g.common_first && g.compared > 0)
      out += "; #" + std::to_string(g.common_first) + "-#" + std::to_string(g.common_last) + " in every dump, " +
             std::to_string(g.compared) + " compared";
    out += "\n";
    if (!g.without_dump.empty())
      out += clip("  no dump from " + describe_ranks(g.without_dump, v.world) +
                      ": what they did is unknown (a rank stuck holding Python's lock cannot dump)",
                  kReportLineMax) +
             "\n";
    if (g.parted_seq >= 0) {
      out += clip("  parts at " + describe_fr_entry(g.parted.entry) + ": joined by " +
                      describe_ranks(g.parted.ranks, v.world) + ", never by " + describe_ranks(g.never_joined, v.world),
                  kReportLineMax) +
             "\n";
      if (!g.parted.entry.frame.empty()) out += clip("    enqueued at " + g.parted.entry.frame, kReportLineMax) + "\n";
    }
    out += "  last collective of each rank:\n";
    last_lines(g, v.world, out);
    if (!g.mismatches.empty()) {
      out += "  mismatches (first " + std::to_string(g.mismatches.size()) + "):\n";
      mismatch_lines(g, v.world, out);
    }
    if (g.p2p > 0)
      out += "  " + std::to_string(g.p2p) + " point-to-point entries, not matched (ordered per peer pair)\n";
  }
  std::set<std::string> notes;
  for (const FrDump& d : dumps) notes.insert(d.notes.begin(), d.notes.end());
  for (const auto& n : notes) out += "\nnote: " + n + "\n";
  return out;
}

nlohmann::json fr_report_json(const FrVerdict& v, const std::vector<FrDump>& dumps) {
  nlohmann::json j = {{"source", "flight_recorder"},
                      {"verdict", v.headline},
                      {"consistent", v.consistent},
                      {"world", v.world},
                      {"ranks", v.ranks}};
  j["groups"] = nlohmann::json::array();
  for (const FrGroupVerdict& g : v.groups) {
    nlohmann::json gj = {{"id", g.id},
                         {"desc", g.desc},
                         {"members", g.members},
                         {"without_dump", g.without_dump},
                         {"common_first", g.common_first},
                         {"common_last", g.common_last},
                         {"compared", g.compared},
                         {"p2p_entries", g.p2p},
                         {"stuck_inside", g.stuck_inside}};
    if (g.parted_seq >= 0)
      gj["parted"] = {{"seq", g.parted_seq},
                      {"collective", entry_json(g.parted.entry)},
                      {"joined", g.parted.ranks},
                      {"never_joined", g.never_joined}};
    else
      gj["parted"] = nullptr;
    gj["last"] = nlohmann::json::array();
    for (const FrLast& l : g.last)
      gj["last"].push_back({{"rank", l.rank},
                            {"collective", l.any ? entry_json(l.entry) : nlohmann::json()},
                            {"completion", fr_done_text(l.done)}});
    gj["mismatches"] = nlohmann::json::array();
    for (const FrMismatch& m : g.mismatches)
      gj["mismatches"].push_back(
          {{"seq", m.seq}, {"kind", fr_mismatch_name(m.kind)}, {"variants", variants_json(m.variants)}});
    j["groups"].push_back(std::move(gj));
  }
  j["files"] = nlohmann::json::array();
  for (const FrDump& d : dumps)
    j["files"].push_back({{"rank", d.rank},
                          {"path", d.path},
                          {"version", d.version},
                          {"entries", d.entries.size()},
                          {"notes", d.notes}});
  return j;
}

}  // namespace ddp
