#include "viewer/headless.h"

#include <imgui.h>

#include <chrono>

namespace ddp::viewer {

HeadlessImGui::HeadlessImGui(float width, float height) : w_(width), h_(height) {
  ctx_ = ImGui::CreateContext();
  ImGui::SetCurrentContext(ctx_);
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(width, height);
  io.DeltaTime = 1.0f / 60.0f;
  unsigned char* pixels = nullptr;
  int tw = 0, th = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &tw, &th);
  io.Fonts->SetTexID(nullptr);
  ImGui::StyleColorsDark();
}

HeadlessImGui::~HeadlessImGui() { ImGui::DestroyContext(ctx_); }

double HeadlessImGui::frame(App& app, float mouse_x, float mouse_y, float wheel, bool mouse_down) {
  ImGui::SetCurrentContext(ctx_);
  ImGuiIO& io = ImGui::GetIO();
  io.DisplaySize = ImVec2(w_, h_);
  io.DeltaTime = 1.0f / 60.0f;
  io.MousePos = mouse_x < 0 ? ImVec2(-FLT_MAX, -FLT_MAX) : ImVec2(mouse_x, mouse_y);
  io.MouseWheel = wheel;
  io.MouseDown[0] = mouse_down;
  auto t0 = std::chrono::steady_clock::now();
  ImGui::NewFrame();
  // ImGui's log, to the context's own clipboard (without a window, ImGui keeps that itself): public API only
  if (capture_text_) ImGui::LogToClipboard();
  app.frame(w_, h_);
  if (capture_text_) {
    ImGui::LogFinish();
    const char* text = ImGui::GetClipboardText();
    text_ = text ? text : "";
  }
  ImGui::Render();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

ImDrawData* HeadlessImGui::draw_data() const { return ImGui::GetDrawData(); }

size_t HeadlessImGui::count_vertices(uint32_t abgr) const {
  ImDrawData* dd = ImGui::GetDrawData();
  size_t n = 0;
  if (!dd) return 0;
  for (int i = 0; i < dd->CmdListsCount; ++i) {
    const ImDrawList* dl = dd->CmdLists[i];
    for (const ImDrawVert& v : dl->VtxBuffer) n += v.col == abgr;
  }
  return n;
}

}  // namespace ddp::viewer
