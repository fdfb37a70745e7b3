#pragma once
// An ImGui context without a window or GL: builds the font atlas and runs App::frame into draw lists. Tests inspect
// the draw data; the benchmark times frame building exactly as the window would, minus the GPU upload.
#include <string>

#include "viewer/app.h"

struct ImDrawData;
struct ImGuiContext;

namespace ddp::viewer {

class HeadlessImGui {
 public:
  HeadlessImGui(float width, float height);
  ~HeadlessImGui();
  HeadlessImGui(const HeadlessImGui&) = delete;
  HeadlessImGui& operator=(const HeadlessImGui&) = delete;

  // One frame: NewFrame, app.frame, Render. Returns the CPU time in ms. `mouse` < 0: no mouse.
  double frame(App& app, float mouse_x = -1, float mouse_y = -1, float wheel = 0, bool mouse_down = false);
  ImDrawData* draw_data() const;
  // Vertices in the draw data whose colour is exactly `abgr` (ImGui's packing, as ddp::stage_color).
  size_t count_vertices(uint32_t abgr) const;
  // Keeps the text every widget of each frame writes (ImGui's log), tooltips included, for tests to read: the draw
  // data holds glyphs, not words.
  void capture_text(bool on) { capture_text_ = on; }
  const std::string& text() const { return text_; }  // the last frame's, while capture_text is on

 private:
  ImGuiContext* ctx_ = nullptr;
  float w_, h_;
  bool capture_text_ = false;
  std::string text_;
};

}  // namespace ddp::viewer
