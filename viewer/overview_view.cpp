// The overview of all ranks above the timelines (traces/timeline/rank_overview.h): one column per rank, one row per
// step, always on screen. More ranks or steps than pixels share a pixel, which shows the worst of them (a straggler
// among 1024 ranks stays visible); runs of equal colour are one rectangle, so a frame draws a few hundred, not a
// rank x step count. Hover names the cell, a click fits that step and scrolls the timelines to that rank, expanded.
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "viewer/app.h"

namespace ddp::viewer {
namespace {

constexpr float kLabelW = 170.0f;  // the timelines' label column: the strip's time-free axis starts where theirs does
constexpr float kRowPxMin = 2.0f, kStripMaxH = 96.0f, kStripMinH = 24.0f;
constexpr int kLevels = 12;  // colour steps of the busy-time score: 1x (and below) .. 2.1x and above
constexpr ImU32 kMissing = IM_COL32(30, 30, 34, 255);

// A quantised cell colour: equal neighbours merge into one rectangle.
ImU32 score_colour(float score) {
  const int level = std::clamp(static_cast<int>((score - 1.0f) * 10.0f), 0, kLevels - 1);
  if (level == 0) return IM_COL32(40, 80, 96, 255);
  const float f = static_cast<float>(level - 1) / static_cast<float>(kLevels - 2);
  return IM_COL32(230, static_cast<int>(210 - 170 * f), static_cast<int>(70 - 40 * f), 255);
}

ImU32 cell_colour(const App& app, const OverviewCell& c) {
  if (!c.present) return kMissing;
  if (app.overview_colour == 1) return c.dominant == kNoStage ? kMissing : stage_color(static_cast<Stage>(c.dominant));
  return score_colour(c.score);
}

std::string column_name(const App& app, size_t col) {
  const int rank = app.overview.ranks[col];
  return rank >= 0 ? "rank " + std::to_string(rank) : app.tl.processes[app.overview.process[col]].name;
}

// The ranks (or steps) a pixel bin holds: [lo, hi).
struct Bins {
  size_t items = 0, count = 0;
  size_t lo(size_t b) const { return b * items / count; }
  size_t hi(size_t b) const { return (b + 1) * items / count; }
};

// The cell of a bin that decides its colour: the highest score (the busiest rank of those sharing the pixel).
std::pair<size_t, size_t> worst_in(const RankOverview& o, const Bins& rows, size_t rb, const Bins& cols, size_t cb) {
  std::pair<size_t, size_t> best{rows.lo(rb), cols.lo(cb)};
  float top = -1;
  for (size_t r = rows.lo(rb); r < rows.hi(rb); ++r)
    for (size_t c = cols.lo(cb); c < cols.hi(cb); ++c)
      if (o.at(r, c).present && o.at(r, c).score > top) top = o.at(r, c).score, best = {r, c};
  return best;
}

float strip_height(const RankOverview& o) {
  return std::clamp(static_cast<float>(o.steps.size()) * kRowPxMin * 2, kStripMinH, kStripMaxH);
}

void header(App& app) {
  const RankOverview& o = app.overview;
  ImGui::TextDisabled("all %zu ranks x %zu steps (steps %u-%u)", o.ranks.size(), o.steps.size(), o.steps.front(),
                      o.steps.back());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(300);
  ImGui::Combo("##overview_colour", &app.overview_colour,
               "busy time against the median rank\0dominant stage of the step\0");
  ImGui::SameLine();
  if (app.overview_colour == 0)
    ImGui::TextDisabled(
        "dark: as busy as the median rank; yellow to red: up to 2x and more (time not waiting for "
        "peers). Click a cell: that rank and step");
  else
    ImGui::TextDisabled("stage colours as in the timelines. Click a cell: that rank and step");
}

void tooltip(const App& app, size_t row, size_t col) {
  const OverviewCell& c = app.overview.at(row, col);
  ImGui::BeginTooltip();
  ImGui::Text("%s, step %u", column_name(app, col).c_str(), app.overview.steps[row]);
  if (c.present) {
    ImGui::Text("busy %s of the step's %s: %.2fx the median rank", format_duration(c.own_ns).c_str(),
                format_duration(c.step_ns).c_str(), static_cast<double>(c.score));
    if (c.dominant != kNoStage)
      ImGui::Text("most time in %s", std::string(stage_name(static_cast<Stage>(c.dominant))).c_str());
  } else {
    ImGui::TextUnformatted("not in this rank's trace");
  }
  ImGui::TextDisabled("click: fit the step, expand and scroll to the rank");
  ImGui::EndTooltip();
}

}  // namespace

float overview_height(const App& app) {
  if (app.overview.empty() || app.overview.ranks.size() < 2) return 0;
  return ImGui::GetFrameHeightWithSpacing() + strip_height(app.overview) + ImGui::GetStyle().ItemSpacing.y;
}

void draw_overview(App& app, float width) {
  const RankOverview& o = app.overview;
  if (overview_height(app) == 0) return;
  header(app);
  const float h = strip_height(o);
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const float x0 = top.x + kLabelW, w = std::max(10.0f, width - kLabelW - ImGui::GetStyle().ScrollbarSize);
  ImGui::InvisibleButton("overview", ImVec2(width, h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(top, ImVec2(top.x + width, top.y + h), kMissing);
  char label[64];
  std::snprintf(label, sizeof label, "steps %u-%u", o.steps.front(), o.steps.back());
  dl->AddText(ImVec2(top.x + 4, top.y + 2), IM_COL32(200, 200, 200, 255), label);
  std::snprintf(label, sizeof label, "ranks: %s ..", column_name(app, 0).c_str());
  dl->AddText(ImVec2(top.x + 4, top.y + h - ImGui::GetFontSize() - 2), IM_COL32(160, 160, 160, 255), label);

  const Bins cols{o.ranks.size(), std::min(o.ranks.size(), static_cast<size_t>(w))};
  const Bins rows{o.steps.size(), std::min(o.steps.size(), static_cast<size_t>(h / kRowPxMin))};
  const float bw = w / static_cast<float>(cols.count), bh = h / static_cast<float>(rows.count);
  for (size_t rb = 0; rb < rows.count; ++rb) {
    const float y = top.y + static_cast<float>(rb) * bh;
    size_t run_start = 0;
    ImU32 run_colour = 0;
    for (size_t cb = 0; cb <= cols.count; ++cb) {
      ImU32 colour = 0;
      if (cb < cols.count) {
        const auto [r, c] = worst_in(o, rows, rb, cols, cb);
        colour = cell_colour(app, o.at(r, c));
      }
      if (cb > 0 && (cb == cols.count || colour != run_colour) && run_colour != kMissing) {
        dl->AddRectFilled(ImVec2(x0 + static_cast<float>(run_start) * bw, y),
                          ImVec2(x0 + static_cast<float>(cb) * bw, y + std::max(1.0f, bh - (bh > 4 ? 1 : 0))),
                          run_colour);
        ++app.last.overview_rects;
      }
      if (cb == 0 || colour != run_colour) run_start = cb, run_colour = colour;
    }
  }

  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (ImGui::IsItemHovered() && mouse.x >= x0 && mouse.x < x0 + w) {
    const size_t cb = std::min(cols.count - 1, static_cast<size_t>((mouse.x - x0) / bw));
    const size_t rb = std::min(rows.count - 1, static_cast<size_t>(std::max(0.0f, mouse.y - top.y) / bh));
    const auto [r, c] = worst_in(o, rows, rb, cols, cb);
    tooltip(app, r, c);
    if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) app.show_rank_step(r, c);
  }
}

}  // namespace ddp::viewer
