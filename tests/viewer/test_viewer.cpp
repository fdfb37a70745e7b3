// The viewer: view arithmetic, whole frames built headless (draw data), and the real binary under xvfb-run
// (screenshots whose pixels show the lanes, error exits).
#include <gtest/gtest.h>
#include <imgui.h>
#include <stb/stb_image.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "tests/support/synthetic_run.h"
#include "traces/native/load_run.h"
#include "traces/replay/what_if.h"
#include "viewer/app.h"
#include "viewer/headless.h"

namespace fs = std::filesystem;
using namespace ddp;
using namespace ddp::viewer;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ddp_viewer_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string make_run(const std::string& name) {
  std::string dir = temp_dir(name);
  SyntheticRunOptions o;
  o.steps = 6;
  o.kernels_per_step = 40;
  std::string err;
  EXPECT_GT(write_synthetic_run(dir, o, err), 0) << err;
  return dir;
}

const std::string kKineto = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/alexnet_1gpu_kineto.json.gz";
const std::string kKinetoCpu = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/cpu_only_kineto.json.gz";
// Real per-rank traces of a PyTorch DDP job whose rank 1 has a slow Dataset (tests/data/README.md).
const std::string kSlowDataRanks = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-2.11-cpu/slow-data-rank1";

std::vector<std::string> trace_files(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(folder)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

struct Exit {
  int code = -1;
  std::string out;
};

Exit run_cmd(const std::string& cmd, const std::string& dir) {
  std::string log = dir + "/cmd.log";
  int st = std::system((cmd + " > " + log + " 2>&1").c_str());
  Exit e;
  e.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::ifstream in(log);
  e.out.assign(std::istreambuf_iterator<char>(in), {});
  return e;
}

bool have_xvfb() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

// Pixels of a PNG that have exactly the colour `abgr` (ImGui's packing, as ddp::stage_color).
struct Image {
  int w = 0, h = 0;
  std::vector<uint8_t> rgba;
  size_t count(uint32_t abgr) const {
    size_t n = 0;
    for (size_t i = 0; i + 3 < rgba.size(); i += 4)
      n += rgba[i] == (abgr & 0xFF) && rgba[i + 1] == ((abgr >> 8) & 0xFF) && rgba[i + 2] == ((abgr >> 16) & 0xFF);
    return n;
  }
};

Image load_png(const std::string& path) {
  Image img;
  int comp = 0;
  unsigned char* p = stbi_load(path.c_str(), &img.w, &img.h, &comp, 4);
  if (!p) return img;
  img.rgba.assign(p, p + static_cast<size_t>(img.w) * img.h * 4);
  stbi_image_free(p);
  return img;
}

}  // namespace

TEST(ViewState, ZoomKeepsTheAnchorAndPanMoves) {
  ViewState v;
  v.set_data_range(0, 1'000'000);
  v.fit(0, 1'000'000, 0.0);
  EXPECT_NEAR(v.x_of(v.t_of(123.0, 10.0, 1000.0), 10.0, 1000.0), 123.0, 0.01);
  v.zoom(0.5, 0.5);
  EXPECT_EQ(v.t0, 250'000);
  EXPECT_EQ(v.t1, 750'000);
  v.zoom(0.0, 0.5);
  EXPECT_EQ(v.t0, 250'000);
  EXPECT_EQ(v.span(), 250'000);
  v.pan_px(-100, 1000);  // drag left by 100 px -> later times
  EXPECT_EQ(v.t0, 275'000);
  v.zoom(0.5, 1e9);  // cannot zoom out without bound
  EXPECT_LE(v.span(), 4'000'000);
  v.zoom(0.5, 1e-12);
  EXPECT_EQ(v.span(), ViewState::kMinSpan);
}

TEST(ViewerFrame, RunFolderDrawsStageColouredLanesAndWaits) {
  std::string dir = make_run("frame");
  App app;
  std::string err;
  ASSERT_TRUE(app.load(dir, err)) << err;
  ASSERT_EQ(app.tl.processes.size(), 2u);
  EXPECT_EQ(app.tl.processes[1].steps.size(), 6u);
  HeadlessImGui ui(1400, 800);
  for (int i = 0; i < 3; ++i) ui.frame(app);
  EXPECT_GT(app.last.boxes, 50u);
  EXPECT_GT(ui.count_vertices(stage_color(Stage::forward)), 0u);
  EXPECT_GT(ui.count_vertices(stage_color(Stage::backward)), 0u);
  EXPECT_GT(ui.count_vertices(stage_color(Stage::allreduce)), 0u);
  EXPECT_GT(ui.count_vertices(IM_COL32(255, 40, 40, 255)), 0u) << "waits are highlighted";
  // counter tracks and step marks are drawn
  EXPECT_GT(ui.count_vertices(IM_COL32(255, 255, 255, 70)), 0u);

  // wheel over the tracks zooms in, anchored at the mouse
  int64_t before = app.view.span();
  ui.frame(app, 700, 200, 1.0f);
  EXPECT_LT(app.view.span(), before);

  // go to a step
  app.go_to_step(3);
  int64_t a = 0, b = 0;
  ASSERT_TRUE(app.tl.step_range(3, a, b));
  EXPECT_LE(app.view.t0, a);
  EXPECT_GE(app.view.t1, b);
  EXPECT_LT(app.view.span(), (b - a) * 2);
  app.go_to_step(999);
  EXPECT_NE(app.status.find("not in the trace"), std::string::npos);

  // click a span: find where the first process's first forward span is by scanning for a hover-selectable point
  app.go_to_step(2);
  bool selected = false;
  for (float y = 60; y < 400 && !selected; y += 6) {
    ui.frame(app, 900, y, 0, true);
    ui.frame(app, 900, y, 0, false);
    selected = app.sel.active;
  }
  ASSERT_TRUE(selected);
  ui.frame(app);
  EXPECT_TRUE(app.stats_valid);
  EXPECT_GT(app.stats_all.count, 0u);
  fs::remove_all(dir);
}

TEST(ViewerFrame, KinetoTraceDraws) {
  App app;
  std::string err;
  ASSERT_TRUE(app.load(kKineto, err)) << err;
  HeadlessImGui ui(1400, 800);
  for (int i = 0; i < 3; ++i) ui.frame(app);
  EXPECT_GT(app.last.boxes, 5u);
  // zoom onto the GPU kernels: they carry the vocabulary's kernel colour
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& p : app.tl.processes)
    for (const auto& l : p.lanes)
      for (const auto& r : l.rows)
        for (const auto& s : r.spans)
          if (s.stage == static_cast<uint8_t>(Stage::kernel)) {
            lo = std::min(lo, s.t0);
            hi = std::max(hi, s.t1());
          }
  ASSERT_LT(lo, hi);
  app.view.fit(lo, hi);
  ui.frame(app);
  EXPECT_GT(ui.count_vertices(stage_color(Stage::kernel)), 0u);
}

// Per-rank PyTorch profiler traces open as one run: every rank's lanes, the stalls of their analysis, and a click on
// the top cause lands on a step where rank 1's input made both ranks wait.
// A prediction drawn beside the run it predicts (ddp_viewer RUN --beside DIR): each rank's predicted lanes under its
// measured ones, with spans on them; a folder that is no prediction of the run is refused.
TEST(ViewerBeside, APredictedRunIsDrawnUnderEachRanksMeasuredLanes) {
  const std::string dir = make_run("beside_run");
  const std::string predicted = temp_dir("beside_predicted");
  fs::remove_all(predicted);
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load_run(dir, run, err)) << err;
  std::vector<WhatIfEdit> edits;
  ASSERT_TRUE(parse_what_if("rank1.wait_data=median", edits, err) == false);  // a wait is refused, a stage is not
  ASSERT_TRUE(parse_what_if("rank1.forward=median,bandwidth=1GB/s", edits, err)) << err;
  WhatIf w;
  ASSERT_TRUE(what_if(run, edits, w, err, true)) << err;
  ASSERT_TRUE(w.result.ok) << w.result.error;
  ASSERT_TRUE(write_predicted_run(run, w, predicted, err)) << err;
  EXPECT_FALSE(write_predicted_run(run, w, predicted, err)) << "a folder written before is never overwritten";

  App app;
  LoadOptions opts;
  opts.beside = predicted;
  ASSERT_TRUE(app.load(dir, err, opts)) << err;
  ASSERT_EQ(app.tl.processes.size(), 2u);
  for (const auto& p : app.tl.processes) {
    uint64_t measured = 0, replayed = 0;
    for (const auto& lane : p.lanes) (lane.name.rfind("predicted ", 0) == 0 ? replayed : measured) += lane.span_count;
    EXPECT_GT(measured, 0u) << p.name;
    EXPECT_GT(replayed, 0u) << p.name << ": no predicted spans";
  }
  HeadlessImGui ui(1400, 800);
  for (int i = 0; i < 3; ++i) ui.frame(app);
  EXPECT_GT(ui.count_vertices(stage_color(Stage::allreduce)), 0u);

  opts.beside = make_run("beside_other");  // a run, not a prediction of this one: same ranks, so it is drawn...
  App other;
  EXPECT_TRUE(other.load(dir, err, opts)) << err;
  opts.beside = temp_dir("beside_empty");  // ...but an empty folder is no run
  App none;
  EXPECT_FALSE(none.load(dir, err, opts));
  EXPECT_NE(err.find("--beside"), std::string::npos) << err;
  opts.beside = predicted;
  EXPECT_FALSE(none.load(kKineto, err, opts)) << "a Chrome trace has no ranks to draw a prediction beside";
  fs::remove_all(dir);
  fs::remove_all(predicted);
}

TEST(ViewerStalls, PerRankKinetoTracesAreOneRunWithItsStalls) {
  for (const std::vector<std::string>& inputs :
       {trace_files(kSlowDataRanks), std::vector<std::string>{kSlowDataRanks}}) {
    App app;
    std::string err;
    ASSERT_TRUE(App::opens_as_kineto_run(inputs));
    ASSERT_TRUE(app.load(inputs, KinetoStageMap{}, err)) << err;
    std::set<int> ranks;
    for (const Process& p : app.tl.processes) ranks.insert(p.rank);
    EXPECT_EQ(ranks, (std::set<int>{0, 1}));
    // The timeline is there before the analysis ends; frames drawn meanwhile take it once it has.
    HeadlessImGui pending_ui(1400, 800);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (app.analysis_pending() && std::chrono::steady_clock::now() < deadline) pending_ui.frame(app);
    ASSERT_FALSE(app.analysis_pending()) << "no frame took the finished analysis";
    ASSERT_FALSE(app.stalls.empty()) << app.stall_source;
    EXPECT_EQ(app.stalls.front().rank, 1);
    EXPECT_EQ(app.stalls.front().stage, "wait_data");
    EXPECT_NE(app.clock_report.find("rank 1: "), std::string::npos) << app.clock_report;
    app.jump_to(app.stalls.front());
    int64_t a = 0, b = 0;
    ASSERT_TRUE(app.tl.step_range(static_cast<uint32_t>(app.stalls.front().at_step), a, b));
    // The cause's time is on the timeline's clock: inside the step it names.
    EXPECT_GE(app.stalls.front().at_ns, a);
    EXPECT_LE(app.stalls.front().at_ns, b);
    EXPECT_LE(app.view.t0, a);
    EXPECT_GE(app.view.t1, b);
    HeadlessImGui ui(1400, 800);
    ui.frame(app);
    EXPECT_GT(ui.count_vertices(stage_color(Stage::wait_data)), 0u);
  }
  // One trace file alone is still just that file.
  EXPECT_FALSE(App::opens_as_kineto_run({trace_files(kSlowDataRanks).front()}));
}

TEST(ViewerStalls, AnalysisJsonIsReadAndJumps) {
  std::string dir = temp_dir("stalls");
  std::ofstream(dir + "/analysis.json") << R"({"causes":[{"rank":1,"stage":"transform","lost_ms":12.5,"share":0.2,
      "evidence":{"x":1},"t0_ns":5000000}],"flags":[{"id":"tiny_buckets","message":"many small allreduces"}, "plain"]})";
  App app;
  TimelineBuilder b;
  int p = b.process("0");
  int l = b.lane(p, "0");
  Span s;
  s.t0 = 0;
  s.set_t1(100'000'000);
  b.add_span(p, l, s);
  app.set_timeline(b.finish());
  std::string err;
  ASSERT_TRUE(load_stalls_json(app, dir + "/analysis.json", err)) << err;
  ASSERT_EQ(app.stalls.size(), 1u);
  EXPECT_EQ(app.stalls[0].rank, 1);
  EXPECT_EQ(app.stalls[0].stage, "transform");
  EXPECT_TRUE(app.stalls[0].has_time);
  EXPECT_EQ(app.stall_flags.size(), 2u);
  app.jump_to(app.stalls[0]);
  EXPECT_LE(app.view.t0, 5'000'000);
  EXPECT_GE(app.view.t1, 5'000'000);
  EXPECT_LT(app.view.span(), 100'000'000);
  std::ofstream(dir + "/bad.json") << "{\"causes\": [";
  EXPECT_FALSE(load_stalls_json(app, dir + "/bad.json", err));
  HeadlessImGui ui(1000, 700);
  ui.frame(app);  // the panel draws with flags and causes
  fs::remove_all(dir);
}

// A cause of every rank at once (rank -1 in the analysis) is labelled as such, not "rank -1".
TEST(ViewerStalls, AllRanksCauseIsNamedSo) {
  EXPECT_EQ(who_label(-1), "all ranks");
  EXPECT_EQ(who_label(1), "rank 1");
}

// The synthetic run plants a slow loader on rank 1 (its compute waits twice as long for input as rank 0's, see
// SyntheticRunOptions::wait_data_ns): the stalls panel must name rank 1's input pipeline as the worst cause.
TEST(ViewerStalls, RunFolderIsAnalysed) {
  std::string dir = make_run("analysis");
  App app;
  std::string err;
  ASSERT_TRUE(app.load(dir, err)) << err;
  EXPECT_FALSE(app.stall_source.empty());
  ASSERT_FALSE(app.stalls.empty()) << "the planted slow loader is not detected";
  for (const auto& s : app.stalls) {
    EXPECT_GE(s.lost_ms, 0);
    EXPECT_FALSE(s.stage.empty());
  }
  auto is_input_stage = [](const std::string& name) {
    std::optional<Stage> st = stage_from_name(name);
    return st && (is_data_stage(*st) || *st == Stage::wait_data);
  };
  auto worst_input_loss = [&](int rank) {
    double lost = 0;
    for (const auto& s : app.stalls)
      if (s.rank == rank && is_input_stage(s.stage)) lost = std::max(lost, s.lost_ms);
    return lost;
  };
  const StallItem& top = app.stalls.front();  // ranked by time lost
  EXPECT_EQ(top.rank, 1) << top.stage << ": " << top.text;
  EXPECT_TRUE(is_input_stage(top.stage)) << top.stage << ": " << top.text;
  EXPECT_GT(top.lost_ms, 0);
  EXPECT_GT(worst_input_loss(1), worst_input_loss(0)) << "rank 1's loader is the slow one";
  EXPECT_TRUE(top.has_time);
  fs::remove_all(dir);
}

TEST(ViewerBinary, BadInputExitsWithAMessage) {
  std::string dir = temp_dir("bad");
  std::string exe = DDP_VIEWER_EXE;
  Exit e = run_cmd(exe, dir);
  EXPECT_EQ(e.code, 2) << e.out;
  EXPECT_NE(e.out.find("usage"), std::string::npos);
  e = run_cmd(exe + " x --frames nope", dir);
  EXPECT_EQ(e.code, 2) << e.out;
  e = run_cmd(exe + " " + dir + "/missing.json", dir);
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find("no such file"), std::string::npos) << e.out;
  std::ofstream(dir + "/trunc.json") << R"({"traceEvents":[{"ph":"X","name":"forward","ts":1,)";
  e = run_cmd(exe + " " + dir + "/trunc.json --screenshot " + dir + "/x.png", dir);
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find("truncated"), std::string::npos) << e.out;
  EXPECT_FALSE(fs::exists(dir + "/x.png"));
  std::ofstream(dir + "/garbage.json") << "not json at all";
  e = run_cmd(exe + " " + dir + "/garbage.json", dir);
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find("malformed"), std::string::npos) << e.out;
  fs::create_directories(dir + "/empty_run");
  e = run_cmd(exe + " " + dir + "/empty_run", dir);
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find("no readable rank traces"), std::string::npos) << e.out;
  fs::remove_all(dir);
}

TEST(ViewerBinary, ScreenshotOfARunShowsStageColours) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run not installed";
  std::string dir = make_run("shot");
  std::string png = dir + "/shot.png";
  Exit e = run_cmd("xvfb-run -a -s '-screen 0 1600x1000x24' " + std::string(DDP_VIEWER_EXE) + " " + dir +
                       " --screenshot " + png + " --frames 4 --width 1280 --height 720",
                   dir);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("frame_cpu_ms mean="), std::string::npos) << e.out;
  Image img = load_png(png);
  ASSERT_EQ(img.w, 1280);
  ASSERT_EQ(img.h, 720);
  // the lanes are painted in the vocabulary's colours: large areas of forward and backward on both ranks
  EXPECT_GT(img.count(stage_color(Stage::forward)), 2000u);
  EXPECT_GT(img.count(stage_color(Stage::backward)), 2000u);
  EXPECT_GT(img.count(stage_color(Stage::allreduce)), 200u);
  EXPECT_GT(img.count(stage_color(Stage::transform)), 200u);
  fs::remove_all(dir);
}

TEST(ViewerBinary, PerRankKinetoTracesAndMapErrors) {
  std::string dir = temp_dir("kineto_ranks");
  const std::string exe = DDP_VIEWER_EXE;
  Exit e = run_cmd(exe + " " + kKinetoCpu + " --map 'x=forward'", dir);
  EXPECT_EQ(e.code, 2) << e.out;
  EXPECT_NE(e.out.find("--map applies to per-rank"), std::string::npos) << e.out;
  e = run_cmd(exe + " " + kSlowDataRanks + " --map '(=forward'", dir);
  EXPECT_EQ(e.code, 2) << e.out;
  std::ofstream(dir + "/rank1.json") << R"({"traceEvents":[{"ph":"X",)";
  e = run_cmd(exe + " " + trace_files(kSlowDataRanks).front() + " " + dir + "/rank1.json" + " " + dir + "/nope.json",
              dir);
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find("nope.json: no such file"), std::string::npos) << e.out;
  if (have_xvfb()) {
    const std::string png = dir + "/ranks.png";
    e = run_cmd("xvfb-run -a -s '-screen 0 1600x1000x24' " + exe + " " + kSlowDataRanks + " --screenshot " + png +
                    " --frames 3 --width 1200 --height 700",
                dir);
    ASSERT_EQ(e.code, 0) << e.out;
    EXPECT_NE(e.out.find("processes"), std::string::npos) << e.out;
    Image img = load_png(png);
    ASSERT_EQ(img.w, 1200);
    EXPECT_GT(img.count(stage_color(Stage::wait_data)), 500u);  // rank 1's slow input, drawn
  }
  fs::remove_all(dir);
}

TEST(ViewerBinary, ScreenshotOfKinetoTrace) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run not installed";
  std::string dir = temp_dir("kineto_shot");
  std::string png = dir + "/kineto.png";
  Exit e = run_cmd("xvfb-run -a -s '-screen 0 1600x1000x24' " + std::string(DDP_VIEWER_EXE) + " " + kKinetoCpu +
                       " --screenshot " + png + " --frames 3 --width 1200 --height 700",
                   dir);
  ASSERT_EQ(e.code, 0) << e.out;
  Image img = load_png(png);
  ASSERT_EQ(img.w, 1200);
  // the profiler step spans its whole window in the vocabulary's step colour; gloo all_reduce has its hashed colour
  EXPECT_GT(img.count(stage_color(Stage::step)), 1000u);
  EXPECT_GT(img.count(name_color("PyTorch Profiler (0)")), 1000u);
  fs::remove_all(dir);
}

namespace {
// --steps A-B in the viewer: a big trace a few steps at a time. The stage processes hold only those steps, every
// original event of the rank files lies in their time, and a window the traces do not reach is an error.
TEST(ViewerSteps, AStepWindowOfPerRankTracesHoldsOnlyItsSteps) {
  App all, app;
  std::string err;
  ASSERT_TRUE(all.load({kSlowDataRanks}, KinetoStageMap{}, err)) << err;
  LoadOptions opts;
  ASSERT_TRUE(parse_step_window("5-8", opts.steps, err)) << err;
  ASSERT_TRUE(app.load({kSlowDataRanks}, KinetoStageMap{}, err, opts)) << err;
  EXPECT_LT(app.tl.span_count * 4, all.tl.span_count);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Process& p : app.tl.processes)
    for (const StepMark& s : p.steps) {
      EXPECT_GE(s.step, 5u);
      EXPECT_LE(s.step, 8u);
      lo = std::min(lo, s.t0), hi = std::max(hi, s.t1);
    }
  ASSERT_LT(lo, hi);
  for (const Process& p : app.tl.processes)
    for (const Lane& l : p.lanes)
      for (const Row& r : l.rows)
        for (const Span& s : r.spans) {
          EXPECT_GE(s.t1(), lo - 5'000'000) << p.name;  // the clock offsets' few ms
          EXPECT_LE(s.t0, hi + 5'000'000) << p.name;
        }
  App none;
  ASSERT_TRUE(parse_step_window("500-600", opts.steps, err));
  EXPECT_FALSE(none.load({kSlowDataRanks}, KinetoStageMap{}, err, opts));
  EXPECT_NE(err.find("the traces hold steps"), std::string::npos) << err;
}
}  // namespace
