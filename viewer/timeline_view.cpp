// The timeline widget: a ruler, then per process (rank) a header, a lane per thread lane (one row per nesting depth)
// and counter tracks; spans coloured by the stage vocabulary, merged when narrower than a few pixels, step boundaries
// marked, waits highlighted. Wheel zooms at the mouse, drag pans, hover explains, click selects.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
constexpr float kCpuStripH = 4.0f;     // the CPU split's strip along the bottom of a span's box
constexpr float kCpuStripMinW = 6.0f;  // narrower boxes get none: a pixel or two of three colours says nothing

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

// ---- layout: where the tracks are on screen this frame ----

struct TrackLayout {
  float left = 0;                  // the label column's left edge
  float x0 = 0, w = 0, x1 = 0;     // the time axis
  float clip_y0 = 0, clip_y1 = 0;  // the visible part of the tracks window
  ImVec4 label_clip;
  LodView lod;

  bool visible(float y0, float y1) const { return y1 >= clip_y0 && y0 <= clip_y1; }
};

// The time axis: everything right of the label column, less the vertical scrollbar.
TrackLayout layout_time_axis(const ImVec2& top, float width, float scrollbar) {
  TrackLayout t;
  t.left = top.x;
  t.x0 = top.x + kLabelW;
  t.w = std::max(10.0f, width - kLabelW - scrollbar);
  t.x1 = t.x0 + t.w;
  return t;
}

// The tracks window's visible band and the level-of-detail view of this frame (call inside the tracks child).
void layout_tracks_window(TrackLayout& t, const App& app) {
  const ImVec2 wpos = ImGui::GetWindowPos();
  const ImVec2 wsize = ImGui::GetWindowSize();
  t.clip_y0 = wpos.y;
  t.clip_y1 = wpos.y + wsize.y;
  t.label_clip = ImVec4(t.left, t.clip_y0, t.x0 - 4, t.clip_y1);
  t.lod.t0 = app.view.t0;
  t.lod.t1 = app.view.t1;
  t.lod.ns_per_px = app.view.ns_per_px(t.w);
  t.lod.min_px = app.opt.min_px;
}

// x of time t, kept a few pixels around the axis so boxes far off screen stay cheap to draw.
float x_at(const App& app, const TrackLayout& t, int64_t time) {
  double x = app.view.x_of(time, t.x0, t.w);
  return static_cast<float>(std::clamp(x, static_cast<double>(t.x0) - 4.0, static_cast<double>(t.x1) + 4.0));
}

// ---- hit-testing: what is under the mouse ----

struct Pointer {
  ImVec2 pos;
  bool in_tracks = false;  // over the tracks window, right of the labels
  bool in_window = false;  // over the tracks window, labels included
};

struct Hit {
  size_t process = 0, lane = 0, row = 0;
  DrawBox box;
};

bool pointer_on_box(const Pointer& m, float x0, float x1, float ry) {
  return m.in_tracks && m.pos.y >= ry && m.pos.y < ry + kRowH && m.pos.x >= x0 - 1 && m.pos.x <= x1 + 1;
}

// ---- drawing ----

// Where a span sits in the model, for selection and hit results.
struct RowAt {
  size_t process = 0, lane = 0, row = 0;
};

using WaitRuns = std::vector<std::pair<float, float>>;  // x ranges of the wait spans drawn in a process

// Along the bottom of a span's box (x0..x1, the visible part), its wall time split into on a CPU, waiting for a core
// and blocked, each part as wide as its share of the whole span (of its true extent: a span cut by the view's edge
// shows the parts that lie in the view). The part colours: stages.h, cpu_part_color.
void draw_cpu_strip(App& app, ImDrawList* dl, const TrackLayout& t, const Span& s, const SpanCpuSplit& c, float x0,
                    float x1, float y1) {
  const CpuParts parts = cpu_parts(c, s.duration());
  const uint64_t total = parts.total();
  if (total == 0) return;
  const double sx0 = app.view.x_of(s.t0, t.x0, t.w), sw = app.view.x_of(s.t1(), t.x0, t.w) - sx0;
  auto x_after = [&](uint64_t us) {  // each edge from the sum of the parts before it: no gap, no overlap
    return static_cast<float>(std::clamp(sx0 + sw * static_cast<double>(us) / static_cast<double>(total),
                                         static_cast<double>(x0), static_cast<double>(x1)));
  };
  uint64_t before = 0;
  for (size_t i = 0; i < kCpuPartCount; ++i) {
    const float a = x_after(before);
    before += parts.us[i];
    const float z = x_after(before);
    if (z > a) dl->AddRectFilled(ImVec2(a, y1 - kCpuStripH), ImVec2(z, y1), cpu_part_color(static_cast<CpuPart>(i)));
  }
  ++app.last.cpu_strips;
}

void draw_box(App& app, ImDrawList* dl, const TrackLayout& t, const Span& s, const DrawBox& b, float x0, float x1,
              float ry, WaitRuns& waits) {
  const ImU32 col = app.tl.color(s);
  const ImVec2 a(x0, ry + 1), z(x1, ry + kRowH - 1);
  dl->AddRectFilled(a, z, col);
  ++app.last.boxes;
  if (b.merged()) {
    // merged runs: the first span's colour with a dark zigzag-free stripe at the bottom
    dl->AddRectFilled(ImVec2(x0, z.y - 4), z, darker(col, 0.55f));
    ++app.last.merged_boxes;
    app.last.spans_in_merged += b.count;
    return;
  }
  if (x1 - x0 >= 6.0f) dl->AddRect(a, z, darker(col, 0.6f));
  if (x1 - x0 >= 40.0f) {
    std::string_view n = app.tl.name(s);
    ImVec4 clip(std::max(x0, t.x0) + 2, ry, std::min(x1, t.x1) - 2, ry + kRowH);
    dl->AddText(nullptr, 0.0f, ImVec2(std::max(x0, t.x0) + 3, ry + 2), text_on(col), n.data(), n.data() + n.size(),
                0.0f, &clip);
    ++app.last.labels;
  }
  // over the outline and the label, so that all of its height shows
  if (x1 - x0 >= kCpuStripMinW)
    if (const SpanCpuSplit* c = app.tl.cpu_split(s)) draw_cpu_strip(app, dl, t, s, *c, x0, x1, z.y);
  if (app.opt.highlight_waits && s.has_stage() && is_wait(static_cast<Stage>(s.stage))) {
    dl->AddRect(ImVec2(x0 - 1, ry), ImVec2(x1 + 1, ry + kRowH), kWaitOutline, 0.0f, 0, 2.0f);
    waits.emplace_back(x0, x1);
  }
}

bool box_holds_selection(const Selection& sel, const RowAt& at, const DrawBox& b) {
  return sel.active && sel.process == at.process && sel.lane == at.lane && sel.row == at.row && sel.index >= b.first &&
         sel.index < b.first + b.count;
}

// The visible boxes of one row at ry; the box under the pointer (the last one drawn there) becomes `hit`.
void draw_row(App& app, ImDrawList* dl, const TrackLayout& t, const Row& row, const RowAt& at, float ry,
              const Pointer& m, WaitRuns& waits, std::optional<Hit>& hit) {
  static std::vector<DrawBox> boxes;  // reused across rows and frames: no allocation per frame
  boxes.clear();
  query_row(row, t.lod, boxes);
  for (const DrawBox& b : boxes) {
    float x0 = x_at(app, t, b.t0), x1 = x_at(app, t, b.t1);
    if (x1 - x0 < 1.0f) x1 = x0 + 1.0f;
    draw_box(app, dl, t, row.spans[b.first], b, x0, x1, ry, waits);
    if (box_holds_selection(app.sel, at, b))
      dl->AddRect(ImVec2(x0 - 2, ry - 1), ImVec2(x1 + 2, ry + kRowH + 1), IM_COL32(255, 255, 255, 255), 0.0f, 0, 2.0f);
    if (pointer_on_box(m, x0, x1, ry)) hit = Hit{at.process, at.lane, at.row, b};
  }
}

// A lane's background, label and rows, when any of it is on screen.
void draw_lane(App& app, ImDrawList* dl, const TrackLayout& t, const Lane& lane, RowAt at, float y, bool alt,
               const Pointer& m, WaitRuns& waits, std::optional<Hit>& hit) {
  const float lane_h = static_cast<float>(lane.rows.size()) * kRowH;
  if (!t.visible(y, y + lane_h)) return;
  if (alt) dl->AddRectFilled(ImVec2(t.left, y), ImVec2(t.x1, y + lane_h), kLaneAlt);
  dl->AddText(nullptr, 0.0f, ImVec2(t.left + 12, y + 2), IM_COL32(200, 200, 200, 255), lane.name.c_str(), nullptr, 0.0f,
              &t.label_clip);
  for (size_t ri = 0; ri < lane.rows.size(); ++ri) {
    const float ry = y + static_cast<float>(ri) * kRowH;
    if (!t.visible(ry, ry + kRowH)) continue;
    at.row = ri;
    draw_row(app, dl, t, lane.rows[ri], at, ry, m, waits, hit);
  }
}

// The header: the process' name, [+] collapsed or [-] expanded; a click on it toggles.
void draw_process_header(App& app, ImDrawList* dl, const TrackLayout& t, size_t pi, float y, const Pointer& m) {
  if (!t.visible(y, y + kHeaderH)) return;
  const bool open = app.is_expanded(pi);
  dl->AddRectFilled(ImVec2(t.left, y), ImVec2(t.x1, y + kHeaderH), kHeader);
  const std::string label = (open ? "[-] " : "[+] ") + app.tl.processes[pi].name;
  dl->AddText(nullptr, 0.0f, ImVec2(t.left + 4, y + 3), IM_COL32(255, 255, 255, 255), label.c_str(), nullptr, 0.0f,
              nullptr);
  if (m.in_window && m.pos.y >= y && m.pos.y < y + kHeaderH && ImGui::IsMouseClicked(ImGuiMouseButton_Left))
    app.set_rank_expanded(pi, !open);
}

// A red band along the bottom of the process header, so stalls stand out even when lanes scroll away.
void draw_wait_band(ImDrawList* dl, const WaitRuns& waits, float header_y) {
  for (const auto& w : waits)
    dl->AddRectFilled(ImVec2(w.first, header_y + kHeaderH - 5),
                      ImVec2(std::max(w.second, w.first + 2), header_y + kHeaderH), kWaitOutline);
}

// Step boundaries over the whole process (from its top to `bottom`), labelled in the header where there is room.
void draw_step_marks(const App& app, ImDrawList* dl, const TrackLayout& t, const Process& p, float header_y,
                     float bottom) {
  const ViewState& v = app.view;
  auto it = std::lower_bound(p.steps.begin(), p.steps.end(), v.t0,
                             [](const StepMark& m, int64_t time) { return m.t1 < time; });
  float last_x = -1e9f;
  for (; it != p.steps.end() && it->t0 <= v.t1; ++it) {
    float x = x_at(app, t, it->t0);
    if (x - last_x < 6.0f) continue;
    dl->AddLine(ImVec2(x, header_y), ImVec2(x, bottom), kStepLine);
    if (x - last_x > 60.0f && x >= t.x0 && x < t.x1 - 30) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "step %u", it->step);
      dl->AddText(ImVec2(x + 3, header_y + 3), IM_COL32(255, 230, 150, 255), buf);
    }
    last_x = x;
  }
}

// One process from y down: header, lanes, counter tracks and overlays. Returns the y below it.
float draw_process(App& app, ImDrawList* dl, const TrackLayout& t, size_t pi, float y, const Pointer& m,
                   std::optional<Hit>& hit) {
  const Process& p = app.tl.processes[pi];
  const float header_y = y;
  draw_process_header(app, dl, t, pi, header_y, m);
  y += kHeaderH;
  WaitRuns waits;
  bool alt = false;
  for (size_t li = 0; li < p.lanes.size(); ++li) {
    const Lane& lane = p.lanes[li];
    if (lane.span_count == 0) continue;
    draw_lane(app, dl, t, lane, RowAt{pi, li, 0}, y, alt, m, waits, hit);
    y += static_cast<float>(lane.rows.size()) * kRowH + kLaneGap;
    alt = !alt;
  }
  if (app.opt.show_counters) y += draw_counter_tracks(app, p, dl, t.left, t.x0, t.w, y);
  if (app.opt.highlight_waits) draw_wait_band(dl, waits, header_y);
  if (app.opt.show_step_marks && !p.steps.empty() && t.visible(header_y, y))
    draw_step_marks(app, dl, t, p, header_y, y);
  return y + 6.0f;
}

// A collapsed rank: one row, its label ([+] and its first process' name; a click expands the rank) and that
// process' summary row (its busiest lane's first row below the step spans: what the rank did, in stage colours).
float draw_collapsed_rank(App& app, ImDrawList* dl, const TrackLayout& t, size_t pi, float y, const Pointer& m,
                          std::optional<Hit>& hit) {
  const float h = kRowH + 2;
  if (!t.visible(y, y + h)) return y + h;
  const Process& p = app.tl.processes[pi];
  dl->AddRectFilled(ImVec2(t.left, y), ImVec2(t.x0 - 2, y + h - 1), kHeader);
  const std::string label = "[+] " + (p.rank >= 0 ? "rank " + std::to_string(p.rank) : p.name);
  dl->AddText(nullptr, 0.0f, ImVec2(t.left + 4, y + 2), IM_COL32(255, 255, 255, 255), label.c_str(), nullptr, 0.0f,
              &t.label_clip);
  const size_t li = pi < app.summary_lane.size() ? app.summary_lane[pi] : 0;
  const size_t ri = pi < app.summary_row.size() ? app.summary_row[pi] : 0;
  WaitRuns waits;
  if (li < p.lanes.size() && ri < p.lanes[li].rows.size())
    draw_row(app, dl, t, p.lanes[li].rows[ri], RowAt{pi, li, ri}, y + 1, m, waits, hit);
  if (m.in_window && m.pos.x < t.x0 && m.pos.y >= y && m.pos.y < y + h && ImGui::IsMouseClicked(ImGuiMouseButton_Left))
    app.set_rank_expanded(pi, true);
  return y + h;
}

// Every process with something to show, from y down; a collapsed rank is one row. Returns the y below the last one.
float draw_processes(App& app, ImDrawList* dl, const TrackLayout& t, float y, const Pointer& m,
                     std::optional<Hit>& hit) {
  const Timeline& tl = app.tl;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const Process& p = tl.processes[pi];
    if (p.span_count == 0 && p.counters.empty()) continue;    // e.g. Kineto's idle GPU processes
    if (app.scroll_to_process == static_cast<int64_t>(pi)) {  // the overview asked for this one
      ImGui::SetScrollY(ImGui::GetScrollY() + (y - t.clip_y0));
      app.scroll_to_process = -1;
    }
    if (app.is_expanded(pi))
      y = draw_process(app, dl, t, pi, y, m, hit);
    else if (pi >= app.rank_head.size() || app.rank_head[pi])
      y = draw_collapsed_rank(app, dl, t, pi, y, m, hit);
  }
  if (tl.processes.empty())
    dl->AddText(ImVec2(t.x0 + 10, y + 10), IM_COL32(220, 220, 220, 255), "the trace holds no spans");
  return y;
}

// ---- the tooltip of the box under the mouse ----

// The CPU split of the span under the mouse, and which strip colour is which part.
void tooltip_cpu(const SpanCpuSplit& c, int64_t wall_ns) {
  const std::string text = cpu_split_text(c, wall_ns);
  ImGui::Text("cpu       %s", text.c_str());
  const float h = ImGui::GetTextLineHeight();
  for (size_t i = 0; i < kCpuPartCount; ++i) {
    const auto part = static_cast<CpuPart>(i);
    if (i) ImGui::SameLine();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + h - 4, p.y + h - 2),
                                              cpu_part_color(part));
    ImGui::Dummy(ImVec2(h - 2, h));
    ImGui::SameLine();
    const std::string_view name = cpu_part_name(part);
    ImGui::TextUnformatted(name.data(), name.data() + name.size());
  }
}

void tooltip(const App& app, const Hit& h) {
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
    if (s.step != kNoStep)
      ImGui::Text("step      %u  (epoch %u, micro %u)", static_cast<unsigned>(s.step), unsigned{tl.epoch(s)},
                  unsigned{tl.micro(s)});
    if (tl.bucket(s) != kNoBucket) ImGui::Text("bucket    %u", tl.bucket(s));
    if (const uint64_t bytes = tl.bytes(s)) {
      double gbps = s.duration() > 0 ? static_cast<double>(bytes) / static_cast<double>(s.duration()) : 0.0;
      ImGui::Text("bytes     %s  (%.2f GB/s)", format_bytes(static_cast<double>(bytes)).c_str(), gbps);
    }
    if (const SpanCpuSplit* c = tl.cpu_split(s)) tooltip_cpu(*c, s.duration());
    if (s.has_stage() && is_wait(static_cast<Stage>(s.stage)))
      ImGui::TextColored(ImVec4(1, 0.35f, 0.35f, 1), "a wait: see the stalls panel for its cause");
    const std::string extra = tl.extra(s);
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

// ---- input: wheel zooms at the mouse (shift+wheel scrolls), drag pans, click selects ----

void zoom_or_scroll(App& app, const TrackLayout& t, const Pointer& m) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.MouseWheel == 0.0f) return;
  if (io.KeyShift) {
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * kRowH * 3);
  } else if (m.pos.x >= t.x0) {
    double anchor = (m.pos.x - t.x0) / t.w;
    app.view.zoom(anchor, std::pow(0.8, static_cast<double>(io.MouseWheel)));
  }
}

// A click (a press and release without a drag): select the span under the mouse, zoom onto a merged run, or clear
// the selection on empty space.
void click(App& app, const std::optional<Hit>& hit) {
  if (hit && !hit->box.merged()) {
    const Span& s = app.tl.processes[hit->process].lanes[hit->lane].rows[hit->row].spans[hit->box.first];
    app.sel = Selection{true, hit->process, hit->lane, hit->row, hit->box.first, s.name};
  } else if (hit) {
    app.view.fit(hit->box.t0, hit->box.t1, 0.1);
  } else {
    app.sel.active = false;
  }
}

void handle_input(App& app, const TrackLayout& t, bool hovered, const Pointer& m, const std::optional<Hit>& hit) {
  if (hovered) zoom_or_scroll(app, t, m);
  if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    app.press_in_tracks = true;
    app.dragged = false;
  }
  if (app.press_in_tracks && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3.0f)) {
    ImVec2 d = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left);
    app.view.pan_px(d.x, t.w);
    ImGui::SetScrollY(ImGui::GetScrollY() - d.y);
    ImGui::ResetMouseDragDelta(ImGuiMouseButton_Left);
    app.dragged = true;
  }
  if (app.press_in_tracks && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    if (!app.dragged) click(app, hit);
    app.press_in_tracks = false;
  }
}

}  // namespace

CpuParts cpu_parts(const SpanCpuSplit& c, int64_t wall_ns) {
  const SpanCpu split{0, c.cpu_us, c.wait_us};
  CpuParts p;
  p.wait_known = split.wait_known();
  p.us = {c.cpu_us, p.wait_known ? c.wait_us : 0, blocked_us(split, wall_ns)};
  return p;
}

std::string cpu_split_text(const SpanCpuSplit& c, int64_t wall_ns) {
  const CpuParts p = cpu_parts(c, wall_ns);
  auto ms = [](uint32_t us) { return static_cast<double>(us) / 1e3; };
  char buf[160];
  if (p.wait_known)
    std::snprintf(buf, sizeof(buf), "on CPU %.3f ms, waiting for a core %.3f ms, blocked %.3f ms", ms(p.us[0]),
                  ms(p.us[1]), ms(p.us[2]));
  else  // blocked_us then holds the wait too
    std::snprintf(buf, sizeof(buf), "on CPU %.3f ms, waiting for a core not known, blocked %.3f ms (any wait in it)",
                  ms(p.us[0]), ms(p.us[2]));
  return buf;
}

void draw_timeline(App& app, float width, float height) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const ImVec2 top = ImGui::GetCursorScreenPos();
  const float scrollbar = style.ScrollbarSize;
  TrackLayout t = layout_time_axis(top, width, scrollbar);

  draw_ruler(ImGui::GetWindowDrawList(), app.view, t.x0, t.w, top.y, top.x);
  ImGui::Dummy(ImVec2(width, kRulerH));

  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kBackground);
  ImGui::BeginChild("tracks", ImVec2(width, std::max(20.0f, height - kRulerH - style.ItemSpacing.y)), false,
                    ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_AlwaysVerticalScrollbar);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  layout_tracks_window(t, app);
  const ImVec2 start = ImGui::GetCursorScreenPos();
  const bool hovered = ImGui::IsWindowHovered();
  Pointer m;
  m.pos = ImGui::GetIO().MousePos;
  m.in_tracks = hovered && m.pos.x >= t.x0 && m.pos.x < t.x1;
  m.in_window = hovered && m.pos.x >= t.left && m.pos.x < t.x1;

  std::optional<Hit> hit;
  const float bottom = draw_processes(app, dl, t, start.y, m, hit);
  ImGui::SetCursorScreenPos(start);
  ImGui::Dummy(ImVec2(width - scrollbar, std::max(1.0f, bottom - start.y)));

  handle_input(app, t, hovered, m, hit);
  if (hit && !app.dragged) tooltip(app, *hit);
  if (m.in_tracks) dl->AddLine(ImVec2(m.pos.x, t.clip_y0), ImVec2(m.pos.x, t.clip_y1), IM_COL32(255, 255, 255, 40));
  ImGui::EndChild();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
}

}  // namespace ddp::viewer
