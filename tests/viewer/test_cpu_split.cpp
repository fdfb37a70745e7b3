// A span's CPU split in the viewer (traces/model/span_cpu.h): a native trace with cpu events after its spans, drawn
// as a strip of three colours along the bottom of each wide span that has one (not of a span without, nor of a box
// too narrow to show it), the hover tooltip saying the three parts, and the real binary's pixels under xvfb-run.
#include <gtest/gtest.h>
#include <imgui.h>
#include <stb/stb_image.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "traces/model/run_folder.h"
#include "traces/model/span_cpu.h"
#include "traces/native/trace_writer.h"
#include "viewer/app.h"
#include "viewer/headless.h"

namespace fs = std::filesystem;
using namespace ddp;
using namespace ddp::viewer;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr uint32_t kOnCpu = cpu_part_color(CpuPart::on_cpu);
constexpr uint32_t kWaiting = cpu_part_color(CpuPart::waiting_for_core);
constexpr uint32_t kBlocked = cpu_part_color(CpuPart::blocked);

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ddp_viewer_cpu_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// One rank, lane "main": forward 10 ms (5 ms on a CPU, 2 ms waiting for a core, so 3 ms blocked), backward 10 ms
// with no split, optimizer 10 ms (4 ms on a CPU, the wait not known), 10 ms apart. Each cpu event is written right
// after its span on its lane, as the recorder does. `splits` false: the same spans without them.
std::string write_split_run(const std::string& name, bool splits) {
  const std::string dir = temp_dir(name);
  TraceWriter w;
  std::string err;
  EXPECT_TRUE(w.open(dir + "/" + rank_trace_file(0), 0, 1, err)) << err;
  w.write_lane(0, "main");
  std::vector<Event> main;
  auto add = [&](Stage s, int64_t t0, int64_t cpu_ns, int64_t wait_ns) {
    main.push_back(make_span(s, 0, t0, t0 + 10 * kMs));
    if (splits && cpu_ns >= 0) main.push_back(cpu_event(main.back(), static_cast<uint64_t>(cpu_ns), wait_ns));
  };
  add(Stage::forward, 10 * kMs, 5 * kMs, 2 * kMs);
  add(Stage::backward, 30 * kMs, -1, -1);
  add(Stage::optimizer, 50 * kMs, 4 * kMs, -1);
  EXPECT_TRUE(w.write_events(0, main.data(), main.size()));
  w.write_end(main.size(), 0);
  w.close();
  return dir;
}

const Span* find_span(const Timeline& tl, Stage stage) {
  for (const Process& p : tl.processes)
    for (const Lane& l : p.lanes)
      for (const Row& r : l.rows)
        for (const Span& s : r.spans)
          if (s.stage == static_cast<uint8_t>(stage)) return &s;
  return nullptr;
}

// The x extent of the vertices of colour `abgr` in the last frame ({FLT_MAX, -FLT_MAX} when there are none).
std::pair<float, float> x_extent(const HeadlessImGui& ui, uint32_t abgr) {
  std::pair<float, float> e{FLT_MAX, -FLT_MAX};
  const ImDrawData* dd = ui.draw_data();
  for (int i = 0; dd && i < dd->CmdListsCount; ++i)
    for (const ImDrawVert& v : dd->CmdLists[i]->VtxBuffer)
      if (v.col == abgr) e = {std::min(e.first, v.pos.x), std::max(e.second, v.pos.x)};
  return e;
}

float width_of(const HeadlessImGui& ui, uint32_t abgr) {
  const auto e = x_extent(ui, abgr);
  return e.second - e.first;
}

// Shows [a, b] alone (no margin) and draws it.
void show(App& app, HeadlessImGui& ui, int64_t a, int64_t b) {
  app.view.fit(a, b, 0.0);
  ui.frame(app);
  ui.frame(app);
}

}  // namespace

TEST(ViewerCpuSplit, TheTimelineKeepsEachSpansSplitBesideItsOwnDetail) {
  const std::string dir = write_split_run("model", true);
  App app;
  std::string err;
  ASSERT_TRUE(app.load(dir, err)) << err;
  ASSERT_EQ(app.tl.cpu.size(), 2u) << "one split per span that has one, none for the others";
  const Span* fwd = find_span(app.tl, Stage::forward);
  const Span* bwd = find_span(app.tl, Stage::backward);
  const Span* opt = find_span(app.tl, Stage::optimizer);
  ASSERT_TRUE(fwd && bwd && opt);
  ASSERT_NE(app.tl.cpu_split(*fwd), nullptr);
  EXPECT_EQ(app.tl.cpu_split(*fwd)->cpu_us, 5000u);
  EXPECT_EQ(app.tl.cpu_split(*fwd)->wait_us, 2000u);
  EXPECT_EQ(app.tl.cpu_split(*bwd), nullptr);
  ASSERT_NE(app.tl.cpu_split(*opt), nullptr);
  EXPECT_EQ(app.tl.cpu_split(*opt)->wait_us, kWaitUnknown);
  EXPECT_EQ(app.tl.epoch(*fwd), 0u) << "the split takes Span::detail's place; the detail is still read through it";
  EXPECT_EQ(cpu_split_text(*app.tl.cpu_split(*fwd), fwd->duration()),
            "on CPU 5.000 ms, waiting for a core 2.000 ms, blocked 3.000 ms");
  EXPECT_EQ(cpu_split_text(*app.tl.cpu_split(*opt), opt->duration()),
            "on CPU 4.000 ms, waiting for a core not known, blocked 6.000 ms (any wait in it)");
  fs::remove_all(dir);
}

// A span's detail (its epoch, micro-batch, bytes, bucket) stays readable when it also carries a split, also through
// a builder absorbed by another (per-rank files loaded apart, then joined), whose split and detail indexes move.
TEST(ViewerCpuSplit, ASplitKeepsTheSpansDetailThroughAnAbsorb) {
  TimelineBuilder first, second;
  const int p0 = first.process("0"), l0 = first.lane(p0, "0");
  Span a;
  a.t0 = 0;
  a.set_t1(10 * kMs);
  a.detail = first.add_cpu_split(first.add_detail(64, 3, 0, 2, 1), 1000, 500);
  first.add_span(p0, l0, a);
  const int p1 = second.process("1"), l1 = second.lane(p1, "0");
  Span b = a;
  b.detail = second.add_cpu_split(second.add_detail(128, 7, 0, 4, 2), 2000, kWaitUnknown);
  second.add_span(p1, l1, b);
  first.absorb(std::move(second));
  const Timeline tl = first.finish();
  ASSERT_EQ(tl.processes.size(), 2u);
  ASSERT_EQ(tl.cpu.size(), 2u);
  const Span& sa = tl.processes[0].lanes[0].rows[0].spans[0];
  const Span& sb = tl.processes[1].lanes[0].rows[0].spans[0];
  ASSERT_NE(tl.cpu_split(sa), nullptr);
  ASSERT_NE(tl.cpu_split(sb), nullptr);
  EXPECT_EQ(tl.cpu_split(sa)->cpu_us, 1000u);
  EXPECT_EQ(tl.cpu_split(sb)->cpu_us, 2000u);
  EXPECT_EQ(tl.bytes(sa), 64u);
  EXPECT_EQ(tl.bucket(sa), 3u);
  EXPECT_EQ(tl.bytes(sb), 128u);
  EXPECT_EQ(tl.bucket(sb), 7u);
  EXPECT_EQ(tl.epoch(sb), 4u);
  EXPECT_EQ(tl.micro(sb), 2u);
}

TEST(ViewerCpuSplit, AWideSpanWithASplitShowsItsThreePartsAndOthersShowNone) {
  const std::string dir = write_split_run("frame", true);
  App app;
  std::string err;
  ASSERT_TRUE(app.load(dir, err)) << err;
  const Span fwd = *find_span(app.tl, Stage::forward);
  const Span bwd = *find_span(app.tl, Stage::backward);
  const Span opt = *find_span(app.tl, Stage::optimizer);
  HeadlessImGui ui(1200, 700);

  // forward alone across the axis: a strip of three parts, each as wide as its share (5 : 2 : 3)
  show(app, ui, fwd.t0, fwd.t1());
  EXPECT_EQ(app.last.cpu_strips, 1u);
  for (uint32_t c : {kOnCpu, kWaiting, kBlocked}) EXPECT_EQ(ui.count_vertices(c), 4u) << std::hex << c;
  const float on = width_of(ui, kOnCpu), waiting = width_of(ui, kWaiting), blocked = width_of(ui, kBlocked);
  const float all = on + waiting + blocked;
  ASSERT_GT(all, 500.0f) << "the strip runs along the span's box";
  EXPECT_NEAR(on / all, 0.5f, 0.01f);
  EXPECT_NEAR(waiting / all, 0.2f, 0.01f);
  EXPECT_NEAR(blocked / all, 0.3f, 0.01f);
  EXPECT_LT(x_extent(ui, kOnCpu).second, x_extent(ui, kWaiting).first + 0.5f) << "on CPU, then waiting, then blocked";
  EXPECT_LT(x_extent(ui, kWaiting).second, x_extent(ui, kBlocked).first + 0.5f);

  // backward has no split: drawn as before, no strip
  show(app, ui, bwd.t0, bwd.t1());
  EXPECT_EQ(app.last.cpu_strips, 0u);
  EXPECT_GT(ui.count_vertices(stage_color(Stage::backward)), 0u) << "the span itself is drawn";
  for (uint32_t c : {kOnCpu, kWaiting, kBlocked}) EXPECT_EQ(ui.count_vertices(c), 0u) << std::hex << c;

  // optimizer's wait is not known: on a CPU and blocked only
  show(app, ui, opt.t0, opt.t1());
  EXPECT_EQ(app.last.cpu_strips, 1u);
  EXPECT_GT(ui.count_vertices(kOnCpu), 0u);
  EXPECT_EQ(ui.count_vertices(kWaiting), 0u);
  EXPECT_NEAR(width_of(ui, kOnCpu) / (width_of(ui, kOnCpu) + width_of(ui, kBlocked)), 0.4f, 0.01f);

  // zoomed out until each span is a box of its own 3 to 4 px wide, too narrow for a strip (and wider than the merge)
  show(app, ui, 0, 3'000 * kMs);
  EXPECT_EQ(app.last.boxes, 3u);
  EXPECT_EQ(app.last.merged_boxes, 0u);
  EXPECT_EQ(app.last.cpu_strips, 0u);
  for (uint32_t c : {kOnCpu, kWaiting, kBlocked}) EXPECT_EQ(ui.count_vertices(c), 0u) << std::hex << c;
  fs::remove_all(dir);
}

// Hovering forward: the tooltip says its three parts and shows which colour is which (a swatch of each).
TEST(ViewerCpuSplit, TheTooltipSaysTheThreeParts) {
  const std::string dir = write_split_run("tooltip", true);
  App app;
  std::string err;
  ASSERT_TRUE(app.load(dir, err)) << err;
  const Span fwd = *find_span(app.tl, Stage::forward);
  HeadlessImGui ui(1200, 700);
  ui.capture_text(true);
  show(app, ui, fwd.t0, fwd.t1());
  ASSERT_NE(ui.text().find("Highlight waits"), std::string::npos) << "the frame's text is captured";
  EXPECT_EQ(ui.text().find("on CPU 5.000 ms"), std::string::npos) << "no tooltip before the mouse is on a span";
  const size_t strip_only = ui.count_vertices(kWaiting);
  bool hovered = false;
  for (float y = 20; y < 600 && !hovered; y += 4) {
    ui.frame(app, 600, y);
    ui.frame(app, 600, y);  // a tooltip is sized on its first frame and drawn from the next
    hovered = ui.text().find("on CPU 5.000 ms") != std::string::npos;
  }
  ASSERT_TRUE(hovered) << "no tooltip with the split over forward";
  EXPECT_NE(ui.text().find("on CPU 5.000 ms, waiting for a core 2.000 ms, blocked 3.000 ms"), std::string::npos)
      << ui.text();
  EXPECT_EQ(ui.count_vertices(kWaiting), strip_only + 4) << "the tooltip's swatch of the wait's colour";
  EXPECT_EQ(ui.count_vertices(kBlocked), 8u);
  fs::remove_all(dir);
}

// The real binary's pixels (Xvfb, Mesa's llvmpipe): the strip's colours are on screen for a run with splits and
// nowhere for the same run without them.
TEST(ViewerCpuSplit, ScreenshotShowsTheStripOnlyWhereThereAreSplits) {
  if (std::system("command -v xvfb-run > /dev/null 2>&1") != 0) GTEST_SKIP() << "xvfb-run not installed";
  // the run's screenshot: how many of its pixels have each part's colour, in CpuPart order
  auto part_pixels = [](const std::string& dir) {
    const std::string png = dir + "/shot.png", log = dir + "/cmd.log";
    const std::string cmd = "xvfb-run -a -s '-screen 0 1600x1000x24' " + std::string(DDP_VIEWER_EXE) + " " + dir +
                            " --screenshot " + png + " --frames 3 --width 1200 --height 700 > " + log + " 2>&1";
    const int st = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
    std::vector<size_t> n(kCpuPartCount, 0);
    int w = 0, h = 0, comp = 0;
    unsigned char* p = stbi_load(png.c_str(), &w, &h, &comp, 4);
    EXPECT_NE(p, nullptr) << png;
    if (!p) return n;
    for (size_t i = 0; i < static_cast<size_t>(w) * h * 4; i += 4)
      for (size_t k = 0; k < kCpuPartCount; ++k) {
        const uint32_t c = cpu_part_color(static_cast<CpuPart>(k));
        n[k] += p[i] == (c & 0xFF) && p[i + 1] == ((c >> 8) & 0xFF) && p[i + 2] == ((c >> 16) & 0xFF);
      }
    stbi_image_free(p);
    return n;
  };
  const std::string with = write_split_run("shot_with", true), without = write_split_run("shot_without", false);
  // The whole run fits the axis (10 ms to 60 ms): forward and optimizer are each a fifth of it, the strip 4 px tall;
  // forward's wait is a fifth of its strip, so a few hundred pixels of each part at the least.
  const std::vector<size_t> shown = part_pixels(with), none = part_pixels(without);
  EXPECT_GT(shown[0], 300u);
  EXPECT_GT(shown[1], 60u);
  EXPECT_GT(shown[2], 200u);
  EXPECT_GT(shown[2], shown[1]) << "blocked: forward's 3 ms and optimizer's 6 ms against forward's wait of 2 ms";
  for (size_t k = 0; k < kCpuPartCount; ++k) EXPECT_EQ(none[k], 0u) << cpu_part_name(static_cast<CpuPart>(k));
  fs::remove_all(with);
  fs::remove_all(without);
}
