// Per-rank Kineto traces as one timeline: every event of every rank's file on the clock load_kineto_run measured,
// plus the stage spans the analysis read, so the viewer shows what the analysis blames next to every operator. The
// events come from the import's own reading of each file (KinetoTimelineParts), or from reading it again.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "traces/kineto/kineto_import.h"
#include "traces/timeline/timeline_kineto.h"
#include "traces/timeline/timeline_sources.h"

namespace ddp {

struct KinetoTimelineParts::Part {
  explicit Part(std::string p) : path(std::move(p)) {
    if (timeline_detail::args_can_be_read_again(path)) conv.args_in_file(path);
  }
  std::string path;
  TimelineBuilder b;
  timeline_detail::ChromeToTimeline conv{b};  // the file's own keys and clock: its rank and shift come later
  bool out_of_memory = false;
  // One event into the part; after a failed allocation the part takes nothing more (the import goes on).
  bool take(const ChromeEventView& e) {
    if (out_of_memory) return true;
    try {
      return conv(e);
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    }
    return true;
  }
};

KinetoTimelineParts::KinetoTimelineParts() = default;
KinetoTimelineParts::~KinetoTimelineParts() = default;

KinetoFileEvents KinetoTimelineParts::reader() {
  return [this](const std::string& path) -> ChromeEventFn {
    Part* part = parts_.emplace_back(std::make_unique<Part>(path)).get();
    return [part](const ChromeEventView& e) { return part->take(e); };
  };
}

namespace {

// Process sort keys: rank R's stage process first, then its file's processes in the file's own order.
constexpr int64_t kRankSortStride = int64_t{1} << 41;
constexpr int64_t kFileSortRange = int64_t{1} << 40;  // a file's own sort indices (pids) stay below this

// One rank's file read again (a step window, or not seen by the import's reading): with --steps only the events
// touching the window's time (metadata always: names and sort orders).
bool reread_rank_file(KinetoTimelineParts::Part& part, const KinetoRankFile& f, std::string& error) {
  ChromeDocInfo info;
  auto windowed = [&](const ChromeEventView& e) {
    if (e.ph != 'M' && e.has_ts && !f.keeps_time(e.ts_ns, e.has_dur ? e.dur_ns : 0)) return true;
    return part.take(e);
  };
  const ChromeStatus st = parse_chrome_file(f.path, windowed, info);     // streamed
  if (!st.ok() && !(st.error == ChromeError::truncated && f.cut_off)) {  // read once already: the file changed
    error = f.path + ": " + st.message;
    return false;
  }
  return true;
}

}  // namespace

bool timeline_from_kineto_run(const RunTrace& run, KinetoTimelineParts& parts, Timeline& out, std::string& error) {
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
    // The run's files: each one's part from the import's reading, else (a step window) a part read now, in parallel
    // (a thread per file up to the cores). Parts of files the run left out (another cycle, a damaged file) go unused.
    const std::vector<KinetoRankFile> files = kineto_rank_files(run, origin);
    std::vector<KinetoTimelineParts::Part*> part_of(files.size(), nullptr);
    std::vector<std::unique_ptr<KinetoTimelineParts::Part>> fresh(files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      for (auto& p : parts.parts_)
        if (p->path == files[i].path && !files[i].windowed) part_of[i] = p.get();
      if (!part_of[i]) part_of[i] = (fresh[i] = std::make_unique<KinetoTimelineParts::Part>(files[i].path)).get();
    }
    std::vector<std::string> errors(files.size());
    std::vector<char> ok(files.size(), 1);
    std::atomic<size_t> next{0};
    auto work = [&] {
      try {
        for (size_t i = next++; i < files.size(); i = next++)
          if (fresh[i]) ok[i] = reread_rank_file(*fresh[i], files[i], errors[i]);
      } catch (const std::bad_alloc&) {  // the other files' threads finish; this one's file is not ok
      }
    };
    size_t rereads = 0;
    for (const auto& f : fresh) rereads += f != nullptr;
    const size_t threads = std::min<size_t>(rereads, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    // Each file's processes scoped by rank (so they join without colliding), on the common clock.
    std::vector<std::pair<TimelineBuilder*, int64_t>> joining;
    for (size_t i = 0; i < files.size(); ++i) {
      KinetoTimelineParts::Part& part = *part_of[i];
      if (!ok[i] || part.out_of_memory) {
        error = errors[i].empty() ? "out of memory while reading " + files[i].path : errors[i];
        return false;
      }
      const KinetoRankFile& f = files[i];
      part.conv.close(part.conv.last_ts());
      part.b.scope_processes("r" + std::to_string(f.rank) + ":", "rank " + std::to_string(f.rank) + " · ", f.rank,
                             static_cast<int64_t>(f.rank) * kRankSortStride + 1, kFileSortRange);
      joining.emplace_back(&part.b, f.shift_ns);
    }
    b.absorb_all(joining);
    out = b.finish();
  } catch (const std::bad_alloc&) {
    error = "out of memory while building the timeline";
    return false;
  }
  return true;
}

bool timeline_from_kineto_run(const RunTrace& run, Timeline& out, std::string& error) {
  KinetoTimelineParts none;  // every file read again
  return timeline_from_kineto_run(run, none, out, error);
}

}  // namespace ddp
