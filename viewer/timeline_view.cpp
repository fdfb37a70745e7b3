// The timeline widget: a ruler, then per process (rank) a header, a lane per thread lane (one row per nesting depth)
// and counter tracks; spans coloured by the stage vocabulary, merged when narrower than a few pixels, step boundaries
// marked, waits highlighted. Wheel zooms at the mouse, drag pans, hover explains, click selects.
#include <algorithm>
#include <cmath>
#include <optional>

#include <imgui.h>

#include "viewer/app.h"

namespace ddp::viewer {
namespace {

constexpr float kLabelW = 170.0f;
constexpr float kRulerH = 24.0f;
constexpr float kRowH = 18.0f;
constexpr float kHeaderH = 20.0f;
constexpr float kLaneGap = 3.0f;
constexpr ImU32 kBackground = IM_COL32(24, 24, 28, 255);
constexpr ImU32 kLaneAlt = IM_COL32(32, 32, 38, 255);
constexpr ImU32 kHeader = IM_COL32(48, 52, 64, 255);
constexpr ImU32 kWaitOutline = IM_COL32(255, 40, 40, 255);
constexpr ImU32 kStepLine = IM_COL32(255, 255, 255, 70);

ImU32 darker(ImU32 c, float f) {
  auto ch = [&](int shift) { return static_cast<ImU32>(static_cast<float>((c >> shift) & 0xFF) * f) << shift; };
  return ch(0) | ch(8) | ch(16) | (c & 0xFF000000u);
}

ImU32 text_on(ImU32 c) {
  float lum = 0.299f * (c & 0xFF) + 0.587f * ((c >> 8) & 0xFF) + 0.114f * ((c >> 16) & 0xFF);
  return lum > 140 ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

// 1, 2, 5 x 10^k nanoseconds, at least `raw`.
int64_t nice_step(double raw) {
  double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return std::max<int64_t>(1, static_cast<int64_t>(m * p));
  return static_cast<int64_t>(10 * p);
}

void draw_ruler(ImDrawList* dl, const ViewState& v, float x0, float w, float y, float left) {
  dl->AddRectFilled(ImVec2(left, y), ImVec2(x0 + w, y + kRulerH), IM_COL32(40, 40, 46, 255));
  const double npp = v.ns_per_px(w);
  const int64_t major = nice_step(npp * 110.0);
  const int64_t minor = std::max<int64_t>(1, major / 5);
  int64_t t = (v.t0 / minor) * minor;
  if (t < v.t0) t += minor;
  for (; t <= v.t1; t += minor) {
    float x = static_cast<float>(v.x_of(t, x0, w));
    bool is_major = t % major == 0;
    dl->AddLine(ImVec2(x, y + kRulerH - (is_major ? 10.0f : 4.0f)), ImVec2(x, y + kRulerH),
                IM_COL32(200, 200, 200, 255));
    if (is_major) {
      std::string label = format_duration(t);
      dl->AddText(ImVec2(x + 3, y + 2), IM_COL32(220, 220, 220, 255), label.c_str());
    }
  }
  dl->AddText(ImVec2(left + 4, y + 4), IM_COL32(160, 160, 160, 255), "time");
}

struct Hover {
  size_t process = 0, lane = 0, row = 0;
  DrawBox box;
};

void tooltip(const App& app, const Hover& h) {
  const Timeline& tl = app.tl;
  const Process& p = tl.processes[h.process];
  const Lane& lane = p.lanes[h.lane];
  const Row& row = lane.rows[h.row];
  const Span& s = row.spans[h.box.first];
  ImGui::BeginTooltip();
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
  if (h.box.merged()) {
    ImGui::Text("%u spans merged (zoom in to separate them)", h.box.count);
    ImGui::Text("%s .. %s  (%s)", format_duration(h.box.t0).c_str(), format_duration(h.box.t1).c_str(),
                format_duration(h.box.t1 - h.box.t0).c_str());
    std::string_view n = tl.name(s);
    ImGui::Text("first: %.*s", static_cast<int>(std::min<size_t>(n.size(), 200)), n.data());
  } else {
    std::string_view n = tl.name(s);
    ImGui::Text("%.*s%s", static_cast<int>(std::min<size_t>(n.size(), 300)), n.data(), n.size() > 300 ? "..." : "");
    ImGui::Separator();
    ImGui::Text("duration  %s", format_duration(s.duration()).c_str());
    ImGui::Text("start     %s", format_duration(s.t0).c_str());
    ImGui::Text("where     %s / %s", p.name.c_str(), lane.name.c_str());
    if (s.step != kNoStep) ImGui::Text("step      %u  (epoch %u, micro %u)", s.step, s.epoch, s.micro);
    if (s.bucket != kNoBucket) ImGui::Text("bucket    %u", s.bucket);
    if (s.bytes) {
      double gbps = s.duration() > 0 ? static_cast<double>(s.bytes) / static_cast<double>(s.duration()) : 0.0;
      ImGui::Text("bytes     %s  (%.2f GB/s)", format_bytes(static_cast<double>(s.bytes)).c_str(), gbps);
    }
    if (s.has_stage() && is_wait(static_cast<Stage>(s.stage)))
      ImGui::TextColored(ImVec4(1, 0.35f, 0.35f, 1), "a wait: see the stalls panel for its cause");
    std::string_view extra = tl.extra(s);
    if (!extra.empty()) {
      ImGui::Separator();
      ImGui::TextUnformatted(extra.data(), extra.data() + extra.size());
    }
    ImGui::TextDisabled("click: statistics of every '%.*s'", static_cast<int>(std::min<size_t>(n.size(), 40)),
                        n.data());
  }
  ImGui::PopTextWrapPos();
  ImGui::EndTooltip();
}

}  // namespace

void draw_timeline(App& app, float width, float height) {
  ImGuiIO& io = ImGui::GetIO();
  Timeline& tl = app.tl;
  ViewState& v = app.view;
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const float scrollbar = style.ScrollbarSize;
  const float track_x0 = top.x + kLabelW;
  const float track_w = std::max(10.0f, width - kLabelW - scrollbar);
  const float track_x1 = track_x0 + track_w;

  draw_ruler(ImGui::GetWindowDrawList(), v, track_x0, track_w, top.y, top.x);
  ImGui::Dummy(ImVec2(width, kRulerH));

  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kBackground);
  ImGui::BeginChild("tracks", ImVec2(width, std::max(20.0f, height - kRulerH - style.ItemSpacing.y)), false,
                    ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_AlwaysVerticalScrollbar);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 wpos = ImGui::GetWindowPos();
  const ImVec2 wsize = ImGui::GetWindowSize();
  const float clip_y0 = wpos.y, clip_y1 = wpos.y + wsize.y;
  const ImVec2 start = ImGui::GetCursorScreenPos();
  const bool hovered = ImGui::IsWindowHovered();
  const ImVec2 mouse = io.MousePos;
  const bool mouse_in_tracks = hovered && mouse.x >= track_x0 && mouse.x < track_x1;

  LodView lod;
  lod.t0 = v.t0;
  lod.t1 = v.t1;
  lod.ns_per_px = v.ns_per_px(track_w);
  lod.min_px = app.opt.min_px;
  auto X = [&](int64_t t) {
    double x = v.x_of(t, track_x0, track_w);
    return static_cast<float>(std::clamp(x, static_cast<double>(track_x0) - 4.0, static_cast<double>(track_x1) + 4.0));
  };

  static std::vector<DrawBox> boxes;
  std::vector<std::pair<float, float>> waits;
  std::optional<Hover> hover;
  const ImVec4 label_clip(top.x, clip_y0, track_x0 - 4, clip_y1);

  float y = start.y;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const Process& p = tl.processes[pi];
    if (p.span_count == 0 && p.counters.empty()) continue;  // e.g. Kineto's idle GPU processes
    const float proc_top = y;
    // header
    if (y + kHeaderH >= clip_y0 && y <= clip_y1) {
      dl->AddRectFilled(ImVec2(top.x, y), ImVec2(track_x1, y + kHeaderH), kHeader);
      dl->AddText(nullptr, 0.0f, ImVec2(top.x + 4, y + 3), IM_COL32(255, 255, 255, 255), p.name.c_str(), nullptr,
                  0.0f, nullptr);
    }
    const float header_y = y;
    y += kHeaderH;
    waits.clear();
    bool alt = false;
    for (size_t li = 0; li < p.lanes.size(); ++li) {
      const Lane& lane = p.lanes[li];
      if (lane.span_count == 0) continue;
      const float lane_h = static_cast<float>(lane.rows.size()) * kRowH;
      if (y + lane_h >= clip_y0 && y <= clip_y1) {
        if (alt) dl->AddRectFilled(ImVec2(top.x, y), ImVec2(track_x1, y + lane_h), kLaneAlt);
        dl->AddText(nullptr, 0.0f, ImVec2(top.x + 12, y + 2), IM_COL32(200, 200, 200, 255), lane.name.c_str(),
                    nullptr, 0.0f, &label_clip);
        for (size_t ri = 0; ri < lane.rows.size(); ++ri) {
          const float ry = y + static_cast<float>(ri) * kRowH;
          if (ry + kRowH < clip_y0 || ry > clip_y1) continue;
          const Row& row = lane.rows[ri];
          boxes.clear();
          query_row(row, lod, boxes);
          for (const DrawBox& b : boxes) {
            const Span& s = row.spans[b.first];
            float x0 = X(b.t0), x1 = X(b.t1);
            if (x1 - x0 < 1.0f) x1 = x0 + 1.0f;
            const ImU32 col = tl.color(s);
            const ImVec2 a(x0, ry + 1), z(x1, ry + kRowH - 1);
            dl->AddRectFilled(a, z, col);
            ++app.last.boxes;
            if (b.merged()) {
              // merged runs: the first span's colour with a dark zigzag-free stripe at the bottom
              dl->AddRectFilled(ImVec2(x0, z.y - 4), z, darker(col, 0.55f));
              ++app.last.merged_boxes;
              app.last.spans_in_merged += b.count;
            } else {
              if (x1 - x0 >= 6.0f) dl->AddRect(a, z, darker(col, 0.6f));
              if (x1 - x0 >= 40.0f) {
                std::string_view n = tl.name(s);
                ImVec4 clip(std::max(x0, track_x0) + 2, ry, std::min(x1, track_x1) - 2, ry + kRowH);
                dl->AddText(nullptr, 0.0f, ImVec2(std::max(x0, track_x0) + 3, ry + 2), text_on(col), n.data(),
                            n.data() + n.size(), 0.0f, &clip);
                ++app.last.labels;
              }
              if (app.opt.highlight_waits && s.has_stage() && is_wait(static_cast<Stage>(s.stage))) {
                dl->AddRect(ImVec2(x0 - 1, ry), ImVec2(x1 + 1, ry + kRowH), kWaitOutline, 0.0f, 0, 2.0f);
                waits.emplace_back(x0, x1);
              }
            }
            if (app.sel.active && app.sel.process == pi && app.sel.lane == li && app.sel.row == ri &&
                app.sel.index >= b.first && app.sel.index < b.first + b.count)
              dl->AddRect(ImVec2(x0 - 2, ry - 1), ImVec2(x1 + 2, ry + kRowH + 1), IM_COL32(255, 255, 255, 255), 0.0f,
                          0, 2.0f);
            if (mouse_in_tracks && mouse.y >= ry && mouse.y < ry + kRowH && mouse.x >= x0 - 1 && mouse.x <= x1 + 1)
              hover = Hover{pi, li, ri, b};
          }
        }
      }
      y += lane_h + kLaneGap;
      alt = !alt;
    }
    if (app.opt.show_counters) y += draw_counter_tracks(app, p, dl, top.x, track_x0, track_w, y);
    // waits: a red band along the bottom of the process header, so stalls stand out even when lanes scroll away
    if (app.opt.highlight_waits)
      for (const auto& w : waits)
        dl->AddRectFilled(ImVec2(w.first, header_y + kHeaderH - 5), ImVec2(std::max(w.second, w.first + 2), header_y + kHeaderH),
                          kWaitOutline);
    // step boundaries over the whole process
    if (app.opt.show_step_marks && !p.steps.empty()) {
      auto it = std::lower_bound(p.steps.begin(), p.steps.end(), v.t0,
                                 [](const StepMark& m, int64_t t) { return m.t1 < t; });
      float last_x = -1e9f;
      for (; it != p.steps.end() && it->t0 <= v.t1; ++it) {
        float x = X(it->t0);
        if (x - last_x < 6.0f) continue;
        dl->AddLine(ImVec2(x, proc_top), ImVec2(x, y), kStepLine);
        if (x - last_x > 60.0f && x >= track_x0 && x < track_x1 - 30) {
          char buf[32];
          std::snprintf(buf, sizeof(buf), "step %u", it->step);
          dl->AddText(ImVec2(x + 3, header_y + 3), IM_COL32(255, 230, 150, 255), buf);
        }
        last_x = x;
      }
    }
    y += 6.0f;
  }
  if (tl.processes.empty())
    dl->AddText(ImVec2(track_x0 + 10, y + 10), IM_COL32(220, 220, 220, 255), "the trace holds no spans");

  ImGui::SetCursorScreenPos(start);
  ImGui::Dummy(ImVec2(width - scrollbar, std::max(1.0f, y - start.y)));

  // interaction
  if (hovered && io.MouseWheel != 0.0f) {
    if (io.KeyShift) {
      ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * kRowH * 3);
    } else if (mouse.x >= track_x0) {
      double anchor = (mouse.x - track_x0) / track_w;
      v.zoom(anchor, std::pow(0.8, static_cast<double>(io.MouseWheel)));
    }
  }
  if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    app.press_in_tracks = true;
    app.dragged = false;
  }
  if (app.press_in_tracks && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3.0f)) {
    ImVec2 d = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left);
    v.pan_px(d.x, track_w);
    ImGui::SetScrollY(ImGui::GetScrollY() - d.y);
    ImGui::ResetMouseDragDelta(ImGuiMouseButton_Left);
    app.dragged = true;
  }
  if (app.press_in_tracks && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    if (!app.dragged) {
      if (hover && !hover->box.merged()) {
        const Span& s = tl.processes[hover->process].lanes[hover->lane].rows[hover->row].spans[hover->box.first];
        app.sel = Selection{true, hover->process, hover->lane, hover->row, hover->box.first, s.name};
      } else if (hover) {  // a merged run: zoom onto it
        v.fit(hover->box.t0, hover->box.t1, 0.1);
      } else {
        app.sel.active = false;
      }
    }
    app.press_in_tracks = false;
  }
  if (hover && !app.dragged) tooltip(app, *hover);
  if (mouse_in_tracks) {
    dl->AddLine(ImVec2(mouse.x, clip_y0), ImVec2(mouse.x, clip_y1), IM_COL32(255, 255, 255, 40));
  }
  ImGui::EndChild();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
}

}  // namespace ddp::viewer
