// Per-rank Kineto traces as one timeline: every event of every rank's file on the clock load_kineto_run measured,
// plus the stage spans the analysis read, so the viewer shows what the analysis blames next to every operator.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "traces/kineto/kineto_import.h"
#include "traces/timeline/timeline.h"
#include "traces/timeline/timeline_sources.h"

namespace ddp {
namespace {

using timeline_detail::ChromeFileScope;
using timeline_detail::ChromeToTimeline;

// Process sort keys: rank R's stage process first, then its file's processes in the file's own order.
constexpr int64_t kRankSortStride = int64_t{1} << 41;

// One rank's file, re-read in full (the importer kept only its stage spans).
bool add_rank_file(TimelineBuilder& b, const KinetoRankFile& f, std::string& error) {
  ChromeDocInfo info;
  ChromeFileScope scope;
  scope.key_prefix = "r" + std::to_string(f.rank) + ":";
  scope.name_prefix = "rank " + std::to_string(f.rank) + " · ";
  scope.rank = f.rank;
  scope.sort_base = static_cast<int64_t>(f.rank) * kRankSortStride + 1;
  scope.shift_ns = f.shift_ns;
  ChromeToTimeline conv(b, scope);
  // --steps: only the events touching the window's time (metadata always: names and sort orders).
  auto windowed = [&](const ChromeEventView& e) {
    if (e.ph != 'M' && e.has_ts && !f.keeps_time(e.ts_ns, e.has_dur ? e.dur_ns : 0)) return true;
    return conv(e);
  };
  const ChromeStatus st = f.windowed ? parse_chrome_file(f.path, windowed, info)
                                     : parse_chrome_file(f.path, std::ref(conv), info);  // streamed
  if (!st.ok() && !(st.error == ChromeError::truncated && f.cut_off)) {  // read once already: the file changed
    error = f.path + ": " + st.message;
    return false;
  }
  conv.close(conv.last_ts());
  return true;
}

}  // namespace

bool timeline_from_kineto_run(const RunTrace& run, Timeline& out, std::string& error) {
  if (!is_kineto_run(run)) {
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
    // Each rank's file is read again in full, in parallel (a thread per file up to the cores), each into a builder
    // of its own; their processes are scoped by rank, so they join without colliding.
    const std::vector<KinetoRankFile> files = kineto_rank_files(run, origin);
    std::vector<TimelineBuilder> parts(files.size());
    std::vector<std::string> errors(files.size());
    std::vector<char> ok(files.size(), 0);
    std::atomic<size_t> next{0};
    auto work = [&] {
      try {
        for (size_t i = next++; i < files.size(); i = next++) ok[i] = add_rank_file(parts[i], files[i], errors[i]);
      } catch (const std::bad_alloc&) {  // the other files' threads finish; this one's file is not ok
      }
    };
    const size_t threads = std::min<size_t>(files.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    for (size_t i = 0; i < files.size(); ++i) {
      if (!ok[i]) {
        error = errors[i].empty() ? "out of memory while reading " + files[i].path : errors[i];
        return false;
      }
      b.absorb(std::move(parts[i]));
    }
    out = b.finish();
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
  return true;
}

}  // namespace ddp
