// Counter tracks under each process's lanes (host RSS, CUDA allocated/reserved, loader queue depth, Kineto memory)
// and the memory panel: first/last/min/peak per counter and growth over the run.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "viewer/app.h"

namespace ddp::viewer {
namespace {

constexpr float kTrackH = 38.0f;
constexpr ImU32 kCounterColors[] = {IM_COL32(90, 200, 250, 255), IM_COL32(250, 170, 60, 255),
                                    IM_COL32(180, 120, 250, 255), IM_COL32(120, 230, 120, 255)};

std::string value_text(const CounterSeries& c, double v) {
  if (c.bytes) return format_bytes(v);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

float counter_tracks_height(const App& app, const Process& p) {
  (void)app;
  return static_cast<float>(p.counters.size()) * (kTrackH + 2.0f);
}

float draw_counter_tracks(App& app, const Process& p, ImDrawList* dl, float x_label, float x0, float width, float y) {
  const ViewState& v = app.view;
  LodView lod;
  lod.t0 = v.t0;
  lod.t1 = v.t1;
  lod.ns_per_px = v.ns_per_px(width);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const float x1 = x0 + width;
  const ImVec2 wpos = ImGui::GetWindowPos();
  const float clip_y0 = wpos.y, clip_y1 = wpos.y + ImGui::GetWindowSize().y;
  static std::vector<CounterPoint> pts;
  float used = 0;
  for (size_t ci = 0; ci < p.counters.size(); ++ci) {
    const CounterSeries& c = p.counters[ci];
    const float ty = y + used;
    used += kTrackH + 2.0f;
    if (ty + kTrackH < clip_y0 || ty > clip_y1) continue;
    const ImU32 col = kCounterColors[ci % 4];
    dl->AddRectFilled(ImVec2(x_label, ty), ImVec2(x1, ty + kTrackH), IM_COL32(28, 30, 36, 255));
    std::string label = c.name + "\nmax " + value_text(c, c.vmax);
    ImVec4 clip(x_label, ty, x0 - 4, ty + kTrackH);
    dl->AddText(nullptr, 0.0f, ImVec2(x_label + 12, ty + 2), IM_COL32(200, 200, 200, 255), label.c_str(), nullptr, 0.0f,
                &clip);
    pts.clear();
    query_counter(c, lod, pts);
    if (pts.empty()) continue;
    const double lo = std::min(0.0, c.vmin), hi = c.vmax > lo ? c.vmax : lo + 1;
    auto Y = [&](double val) { return ty + kTrackH - 2 - static_cast<float>((val - lo) / (hi - lo)) * (kTrackH - 6); };
    auto X = [&](int64_t t) {
      return static_cast<float>(std::clamp(v.x_of(t, x0, width), static_cast<double>(x0), static_cast<double>(x1)));
    };
    const ImU32 fill = (col & 0x00FFFFFFu) | 0x50000000u;
    for (size_t i = 0; i < pts.size(); ++i) {
      float xa = X(pts[i].t);
      float xb = i + 1 < pts.size() ? X(pts[i + 1].t) : X(std::min(v.t1, app.tl.t_end));
      if (xb < xa + 1) xb = xa + 1;
      // value held until the next sample: a filled step plot, plus the per-pixel min..max range
      dl->AddRectFilled(ImVec2(xa, Y(pts[i].last)), ImVec2(xb, ty + kTrackH - 2), fill);
      dl->AddLine(ImVec2(xa, Y(pts[i].last)), ImVec2(xb, Y(pts[i].last)), col);
      if (pts[i].hi > pts[i].lo) dl->AddLine(ImVec2(xa, Y(pts[i].lo)), ImVec2(xa, Y(pts[i].hi)), col);
    }
    if (ImGui::IsWindowHovered() && mouse.y >= ty && mouse.y < ty + kTrackH && mouse.x >= x0 && mouse.x < x1) {
      int64_t t = v.t_of(mouse.x, x0, width);
      auto it = std::upper_bound(c.t.begin(), c.t.end(), t);
      if (it != c.t.begin()) {
        size_t k = static_cast<size_t>(it - c.t.begin()) - 1;
        ImGui::BeginTooltip();
        ImGui::Text("%s = %s", c.name.c_str(), value_text(c, c.v[k]).c_str());
        ImGui::Text("at %s (%s)", format_duration(c.t[k]).c_str(), p.name.c_str());
        ImGui::EndTooltip();
      }
    }
  }
  return used;
}

void draw_memory_panel(App& app) {
  ImGui::TextUnformatted("Memory and counters");
  ImGui::Separator();
  bool any = false;
  // The counter's name column is as wide as its longest "process: counter" label (stretched columns cut it off).
  float name_width = ImGui::CalcTextSize("counter").x;
  for (const Process& p : app.tl.processes)
    for (const CounterSeries& c : p.counters)
      name_width = std::max(name_width, ImGui::CalcTextSize((p.name + ": " + c.name).c_str()).x);
  if (ImGui::BeginTable("counters", 5,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY |
                            ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("counter", ImGuiTableColumnFlags_WidthFixed, name_width);
    ImGui::TableSetupColumn("first");
    ImGui::TableSetupColumn("last");
    ImGui::TableSetupColumn("peak");
    ImGui::TableSetupColumn("growth");
    ImGui::TableHeadersRow();
    for (const Process& p : app.tl.processes) {
      for (const CounterSeries& c : p.counters) {
        if (c.v.empty()) continue;
        any = true;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%s: %s", p.name.c_str(), c.name.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(value_text(c, c.v.front()).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(value_text(c, c.v.back()).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(value_text(c, c.vmax).c_str());
        ImGui::TableNextColumn();
        double g = c.v.back() - c.v.front();
        bool growing = c.v.front() > 0 && g / c.v.front() > 0.10 && c.bytes;
        if (growing)
          ImGui::TextColored(ImVec4(1, 0.5f, 0.3f, 1), "%s%s", g >= 0 ? "+" : "-", value_text(c, std::fabs(g)).c_str());
        else
          ImGui::Text("%s%s", g >= 0 ? "+" : "-", value_text(c, std::fabs(g)).c_str());
      }
    }
    ImGui::EndTable();
  }
  if (!any) ImGui::TextDisabled("no counters in this trace");
}

}  // namespace ddp::viewer
