// The overview of all ranks (traces/timeline/rank_overview.h, viewer/overview_view.cpp): the straggler among many
// ranks is the hot cell, whatever makes it slow; at 1024 ranks a frame draws a few rectangles per step, every rank
// starts collapsed, and a click on a cell fits the step and expands and scrolls to the rank.
#include <gtest/gtest.h>
#include <imgui.h>

#include "traces/timeline/rank_overview.h"
#include "viewer/app.h"
#include "viewer/headless.h"

using namespace ddp;
using namespace ddp::viewer;

namespace {

constexpr int64_t kMs = 1'000'000;

Span span_of(Stage stage, uint32_t step, int64_t t0, int64_t dur) {
  Span s;
  s.t0 = t0;
  s.set_duration(dur);
  s.stage = static_cast<uint8_t>(stage);
  s.name = static_cast<uint32_t>(stage);  // ids below kStageCount are the stage names
  s.set_step(step);
  return s;
}

// `ranks` ranks, `steps` steps of 10 ms each: forward 2 ms, backward 3 ms, then wait_comm for the slowest rank.
// `slow` has `slow_stage` 6 ms longer (forward: busy; wait_data: waiting for its own input), and everyone else
// waits for it in wait_comm.
Timeline synthetic(int ranks, uint32_t steps, int slow, Stage slow_stage) {
  TimelineBuilder b;
  for (int r = 0; r < ranks; ++r) {
    const int p = b.process("pid" + std::to_string(r));
    b.set_process_name(p, "rank " + std::to_string(r));
    b.set_process_rank(p, r);
    b.set_process_sort(p, r);
    const int main = b.lane(p, "main");
    const int loader = b.lane(p, "loader");
    for (uint32_t s = 0; s < steps; ++s) {
      const int64_t t = static_cast<int64_t>(s) * 20 * kMs;
      const int64_t extra = r == slow ? 6 * kMs : 0;
      int64_t at = t;
      if (r == slow && slow_stage == Stage::wait_data) {
        b.add_span(p, main, span_of(Stage::wait_data, s, at, extra));
        at += extra;
      }
      b.add_span(p, main, span_of(Stage::forward, s, at, 2 * kMs + (slow_stage == Stage::forward ? extra : 0)));
      at += 2 * kMs + (slow_stage == Stage::forward ? extra : 0);
      b.add_span(p, main, span_of(Stage::backward, s, at, 3 * kMs));
      at += 3 * kMs;
      const int64_t end = t + 5 * kMs + 6 * kMs + kMs;  // the slowest rank's compute, then 1 ms of transfer
      b.add_span(p, main, span_of(Stage::wait_comm, s, at, end - at));
      b.add_span(p, main, span_of(Stage::step, s, t, end - t));
      b.add_span(p, loader, span_of(Stage::disk_read, s, t, kMs));
    }
  }
  return b.finish();
}

size_t hottest_column(const RankOverview& o, size_t row) {
  size_t best = 0;
  for (size_t c = 0; c < o.ranks.size(); ++c)
    if (o.at(row, c).score > o.at(row, best).score) best = c;
  return best;
}

TEST(RankOverview, TheStragglerIsTheHotCellWhetherItComputesOrWaitsForItsInput) {
  for (Stage planted : {Stage::forward, Stage::wait_data}) {
    const RankOverview o = build_rank_overview(synthetic(64, 5, 37, planted));
    ASSERT_EQ(o.ranks.size(), 64u);
    ASSERT_EQ(o.steps.size(), 5u);
    for (size_t row = 0; row < o.steps.size(); ++row) {
      EXPECT_EQ(o.ranks[hottest_column(o, row)], 37) << stage_name(planted) << " step " << row;
      const OverviewCell& slow = o.at(row, 37);
      EXPECT_GT(slow.score, 1.8f) << stage_name(planted);
      EXPECT_NEAR(o.at(row, 0).score, 1.0f, 0.01f);
      // A rank waiting for the straggler spends its step mostly in wait_comm; the straggler in its planted stage.
      EXPECT_EQ(o.at(row, 0).dominant, static_cast<uint8_t>(Stage::wait_comm));
      EXPECT_EQ(slow.dominant, static_cast<uint8_t>(planted == Stage::forward ? Stage::forward : Stage::wait_data));
      EXPECT_EQ(slow.step_ns, o.at(row, 0).step_ns) << "every rank's step lasts as long: step time cannot show it";
    }
  }
}

TEST(RankOverview, ABalancedRunHasNoHotCell) {
  const RankOverview o = build_rank_overview(synthetic(16, 4, -1, Stage::forward));
  for (const OverviewCell& c : o.cells) EXPECT_NEAR(c.score, 1.0f, 0.01f);
}

class OverviewFrame : public ::testing::Test {
 protected:
  HeadlessImGui gui{1600, 1000};
};

TEST_F(OverviewFrame, AThousandRanksStartCollapsedAndDrawAFewRectanglesPerStep) {
  App app;
  app.set_timeline(synthetic(1024, 30, 777, Stage::forward));
  ASSERT_EQ(app.overview.ranks.size(), 1024u);
  for (size_t p = 0; p < app.tl.processes.size(); ++p) EXPECT_FALSE(app.is_expanded(p)) << p;
  gui.frame(app);
  // Per step: the run of balanced ranks before the straggler's pixel, its pixel, the run after.
  EXPECT_GT(app.last.overview_rects, 0u);
  EXPECT_LE(app.last.overview_rects, 3u * 30u) << "one rectangle per run of equal colour";
}

TEST_F(OverviewFrame, AFewRanksStartExpanded) {
  App app;
  app.set_timeline(synthetic(2, 3, 1, Stage::forward));
  for (size_t p = 0; p < app.tl.processes.size(); ++p) EXPECT_TRUE(app.is_expanded(p));
}

// A click on the straggler's cell: the step fitted, the rank expanded and scrolled to, the others still collapsed.
TEST_F(OverviewFrame, AClickOnACellFitsTheStepAndScrollsToTheExpandedRank) {
  App app;
  app.set_timeline(synthetic(256, 10, 200, Stage::forward));
  gui.frame(app);
  const size_t col = 200, row = 4;
  app.show_rank_step(row, col);
  EXPECT_TRUE(app.is_expanded(app.overview.process[col]));
  EXPECT_FALSE(app.is_expanded(app.overview.process[0]));
  EXPECT_TRUE(app.view.t0 <= app.overview.step_t0[row] && app.view.t1 >= app.overview.step_t1[row]);
  EXPECT_LT(app.view.span(), 2 * (app.overview.step_t1[row] - app.overview.step_t0[row]));
  EXPECT_NE(app.status.find("rank 200 step 4"), std::string::npos) << app.status;
  EXPECT_EQ(app.scroll_to_process, static_cast<int64_t>(app.overview.process[col]));
  gui.frame(app);
  EXPECT_EQ(app.scroll_to_process, -1) << "the frame scrolled to it";
}

// The same through the mouse: a press on the straggler's column of the strip picks it (its pixel is the only hot
// one; with 1024 ranks across ~1400 pixels every rank has a column of its own).
TEST_F(OverviewFrame, APressOnTheStragglersColumnPicksIt) {
  App app;
  app.set_timeline(synthetic(1024, 8, 777, Stage::forward));
  gui.frame(app);
  const ImGuiStyle& style = ImGui::GetStyle();
  const float left = style.WindowPadding.x, width = 1600 - 2 * style.WindowPadding.x;
  const float x0 = left + 170.0f, w = width - 170.0f - style.ScrollbarSize;
  const float x = x0 + (777.5f / 1024.0f) * w;
  // ImGui floors the pointer to a pixel: the columns around the computed one are tried too.
  bool picked = false;
  for (float y = 0; y < 300 && !picked; y += 3)
    for (float dx : {0.0f, 1.0f, -1.0f, 2.0f})
      if (!picked) {
        gui.frame(app, x + dx, y, 0, true);
        gui.frame(app, x + dx, y, 0, false);
        picked = app.status.find("rank 777 step") != std::string::npos;
      }
  ASSERT_TRUE(picked) << app.status;
  EXPECT_TRUE(app.is_expanded(app.overview.process[777]));
  EXPECT_NE(app.status.find("x the median rank"), std::string::npos) << app.status;
}

// A collapsed rank is one row; a press on its label expands that rank alone (all its processes).
TEST_F(OverviewFrame, APressOnACollapsedRanksLabelExpandsThatRank) {
  App app;
  app.set_timeline(synthetic(256, 6, 3, Stage::forward));
  gui.frame(app);
  auto expanded_ranks = [&] {
    std::vector<int> out;
    for (size_t p = 0; p < app.tl.processes.size(); ++p)
      if (app.is_expanded(p)) out.push_back(app.tl.processes[p].rank);
    return out;
  };
  for (float y = 150; y < 600 && expanded_ranks().empty(); y += 4) {
    gui.frame(app, 30, y, 0, true);
    gui.frame(app, 30, y, 0, false);
  }
  const std::vector<int> open = expanded_ranks();
  ASSERT_EQ(open.size(), 1u) << "one rank (one process each here) expanded by one press";
  EXPECT_GE(open[0], 0);
}

}  // namespace
