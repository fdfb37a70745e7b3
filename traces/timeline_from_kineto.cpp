// Per-rank Kineto traces as one timeline: every event of every rank's file on the clock load_kineto_run measured,
// plus the stage spans the analysis read, so the viewer shows what the analysis blames next to every operator.
#include <algorithm>
#include <filesystem>

#include "traces/kineto_import.h"
#include "traces/timeline.h"
#include "traces/timeline_sources.h"

namespace ddp {
namespace {

using timeline_detail::ChromeFileScope;
using timeline_detail::ChromeToTimeline;

// Process sort keys: rank R's stage process first, then its file's processes in the file's own order.
constexpr int64_t kRankSortStride = int64_t{1} << 41;

const RankTrace* rank_trace(const RunTrace& run, int rank) {
  for (const RankTrace& r : run.ranks)
    if (static_cast<int>(r.rank) == rank) return &r;
  return nullptr;
}

// One rank's file, re-read in full (the importer kept only its stage spans). The file's timestamps are
// baseTimeNanoseconds + ts on the rank's clock; the rank's clock offset puts them on the common clock.
bool add_rank_file(TimelineBuilder& b, const RankTrace& r, const std::string& path, int64_t origin_ns,
                   std::string& error) {
  std::string text;
  ChromeStatus st = read_chrome_bytes(path, text);
  ChromeDocInfo info;
  ChromeFileScope scope;
  scope.key_prefix = "r" + std::to_string(r.rank) + ":";
  scope.name_prefix = "rank " + std::to_string(r.rank) + " · ";
  scope.rank = static_cast<int>(r.rank);
  scope.sort_base = static_cast<int64_t>(r.rank) * kRankSortStride + 1;
  scope.shift_ns = r.created_unix_ns + r.clock_offset_ns() - origin_ns;
  ChromeToTimeline conv(b, scope);
  if (st.ok()) st = parse_chrome_json(text, std::ref(conv), info);
  if (!st.ok()) {  // it was read once already: the file changed under us
    error = path + ": " + st.message;
    return false;
  }
  conv.close(conv.last_ts());
  return true;
}

}  // namespace

bool timeline_from_kineto_run(const RunTrace& run, Timeline& out, std::string& error) {
  const nlohmann::json report = kineto_report_json(run);
  if (report.is_null()) {
    error = "not a run loaded from Kineto traces";
    return false;
  }
  TimelineBuilder b;
  Timeline& tl = b.timeline();
  tl.producer = "kineto";
  tl.source = run.dir;
  tl.problems = run.problems;
  const int64_t origin = run.origin_ns();
  tl.origin_ns = origin;
  try {
    for (const RankTrace& r : run.ranks) {
      const int p = timeline_detail::add_rank_to_timeline(b, r, origin);
      b.set_process_name(p, "rank " + std::to_string(r.rank) + " · stages (ddp_profile)");
      b.set_process_sort(p, static_cast<int64_t>(r.rank) * kRankSortStride);
    }
    for (const auto& f : report.at("files")) {
      const RankTrace* r = rank_trace(run, f.at("rank").get<int>());
      if (r && !add_rank_file(b, *r, f.at("file").get<std::string>(), origin, error)) return false;
    }
    out = b.finish();
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
  return true;
}

}  // namespace ddp
