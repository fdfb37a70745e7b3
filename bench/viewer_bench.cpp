// Viewer benchmark: a synthetic run of ~10 M events (two ranks, pipeline lanes plus a GPU stream of small kernels).
// Prints load time (native run folder -> timeline) and CPU time to build a whole ImGui frame (LOD query + draw
// lists, no GPU) at several zoom levels, as ratios against the targets: 2 s load, 8 ms per frame.
//   viewer_bench [--events N] [--dir DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/synthetic_run.h"
#include "traces/chrome/chrome_export.h"
#include "traces/native/load_run.h"
#include "traces/timeline/timeline.h"
#include "viewer/headless.h"

using namespace ddp;
using namespace ddp::viewer;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int main(int argc, char** argv) {
  int64_t want = 10'000'000;
  std::string dir = (std::filesystem::temp_directory_path() / "ddp_viewer_bench").string();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--events" && i + 1 < argc)
      want = std::atoll(argv[++i]);
    else if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: viewer_bench [--events N] [--dir DIR]\n");
      return 2;
    }
  }
  SyntheticRunOptions o;
  o.ranks = 2;
  o.kernels_per_step = 1000;
  const int64_t per_step = o.kernels_per_step + 6 + o.buckets + 3 + 1 + 3;
  o.steps = static_cast<int>(std::max<int64_t>(1, want / (o.ranks * per_step)));
  std::filesystem::remove_all(dir);
  std::string err;
  auto t = Clock::now();
  int64_t events = write_synthetic_run(dir, o, err);
  if (events < 0) {
    std::fprintf(stderr, "viewer_bench: %s\n", err.c_str());
    return 1;
  }
  std::printf("wrote %lld events (%d steps x %d ranks) in %.0f ms\n", static_cast<long long>(events), o.steps, o.ranks,
              ms_since(t));

  // load: run folder -> timeline, as the viewer does
  t = Clock::now();
  RunTrace run;
  if (!load_run(dir, run, err)) {
    std::fprintf(stderr, "viewer_bench: %s\n", err.c_str());
    return 1;
  }
  double read_ms = ms_since(t);
  auto t2 = Clock::now();
  Timeline tl = timeline_from_run(run);
  double build_ms = ms_since(t2);
  double load_ms = read_ms + build_ms;
  run = RunTrace{};
  std::printf("load_ms=%.0f target=2000 ratio=%.2f (read traces %.0f ms, build timeline %.0f ms, %llu spans)\n",
              load_ms, load_ms / 2000.0, read_ms, build_ms, static_cast<unsigned long long>(tl.span_count));

  HeadlessImGui imgui(1600, 900);
  App app;
  app.set_timeline(std::move(tl));
  struct Zoom {
    const char* name;
    double fraction;  // of the whole trace
  };
  const int64_t whole = app.tl.t_end - app.tl.t_begin;
  const double step_fraction = 1.0 / o.steps;
  std::vector<Zoom> zooms = {{"all", 1.0},
                             {"100_steps", std::min(1.0, 100 * step_fraction)},
                             {"1_step", step_fraction},
                             {"tenth_step", step_fraction / 10}};
  double worst = 0;
  for (const Zoom& z : zooms) {
    int64_t w = std::max<int64_t>(1000, static_cast<int64_t>(whole * z.fraction));
    int64_t a = app.tl.t_begin + (whole - w) / 2;
    app.view.fit(a, a + w, 0.0);
    std::vector<double> ms;
    for (int i = 0; i < 30; ++i) ms.push_back(imgui.frame(app, 800, 300));  // mouse over the tracks: hover work too
    std::sort(ms.begin(), ms.end());
    double mean = 0;
    for (size_t i = 2; i < ms.size(); ++i) mean += ms[i];  // the first frames lay windows out
    mean /= static_cast<double>(ms.size() - 2);
    double p90 = ms[ms.size() * 9 / 10];
    worst = std::max(worst, p90);
    std::printf(
        "frame_build_ms view=%s mean=%.2f p90=%.2f max=%.2f target=8 ratio=%.2f boxes=%llu merged=%llu "
        "spans_in_merged=%llu\n",
        z.name, mean, p90, ms.back(), p90 / 8.0, static_cast<unsigned long long>(app.last.boxes),
        static_cast<unsigned long long>(app.last.merged_boxes),
        static_cast<unsigned long long>(app.last.spans_in_merged));
  }
  std::printf("frame_build_ms worst_p90=%.2f target=8 ratio=%.2f\n", worst, worst / 8.0);

  // the LOD query alone, whole trace, every row
  {
    LodView v;
    v.t0 = app.tl.t_begin;
    v.t1 = app.tl.t_end;
    v.ns_per_px = static_cast<double>(whole) / 1400.0;
    std::vector<DrawBox> boxes;
    auto q = Clock::now();
    const int reps = 50;
    size_t n = 0;
    for (int r = 0; r < reps; ++r)
      for (const Process& p : app.tl.processes)
        for (const Lane& l : p.lanes)
          for (const Row& row : l.rows) {
            boxes.clear();
            query_row(row, v, boxes);
            n += boxes.size();
          }
    std::printf("lod_query_ms view=all per_frame=%.3f boxes=%zu\n", ms_since(q) / reps, n / reps);
  }

  // Chrome JSON load rate on a tenth of the events (a 10 M event JSON is ~2 GB)
  {
    SyntheticRunOptions small = o;
    small.steps = std::max(1, o.steps / 10);
    std::string sdir = dir + "_json";
    std::filesystem::remove_all(sdir);
    write_synthetic_run(sdir, small, err);
    RunTrace srun;
    load_run(sdir, srun, err);
    ExportStats st;
    std::string json = sdir + "/trace.json";
    export_chrome(srun, json, st, err);
    auto q = Clock::now();
    Timeline jt;
    if (!timeline_from_chrome_file(json, jt, err)) {
      std::fprintf(stderr, "viewer_bench: %s\n", err.c_str());
      return 1;
    }
    double jms = ms_since(q);
    double mev_s = static_cast<double>(st.events) / (jms / 1000.0) / 1e6;
    std::printf("chrome_json_load_ms=%.0f events=%llu bytes=%llu rate_mevents_s=%.2f projected_10M_ms=%.0f\n", jms,
                static_cast<unsigned long long>(st.events), static_cast<unsigned long long>(st.bytes), mev_s,
                1e7 / (mev_s * 1e6) * 1000.0);
    std::filesystem::remove_all(sdir);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
