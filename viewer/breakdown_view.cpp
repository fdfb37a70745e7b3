// Per-rank step-time breakdown: a stacked bar per rank of where the main thread's step time goes (waits in red), on
// one scale so ranks compare at a glance, and a table of every stage's time per step.
#include <imgui.h>

#include <algorithm>
#include <vector>

#include "viewer/app.h"

namespace ddp::viewer {
namespace {

// Stages that run on the training (main) thread, in step order; their sum plus "other" is the step.
constexpr Stage kMainStages[] = {Stage::wait_data, Stage::h2d,       Stage::forward,    Stage::backward,
                                 Stage::wait_comm, Stage::optimizer, Stage::checkpoint, Stage::wait_gpu};

double step_mean_ns(const Process& p) {
  if (p.steps.empty()) return 0;
  double sum = 0;
  for (const StepMark& m : p.steps) sum += static_cast<double>(m.t1 - m.t0);
  return sum / static_cast<double>(p.steps.size());
}

bool has_main_stage_time(const Process& p) {
  for (Stage s : kMainStages)
    if (p.stages[static_cast<int>(s)].total_ns > 0) return true;
  return false;
}

// With per-rank Kineto traces each rank has a stage process (what the analysis read) beside its trace's own
// processes, whose steps hold no stage of ours: those would add an all-"other" bar per rank.
bool shown_in_breakdown(const Timeline& tl, const Process& p) {
  if (has_main_stage_time(p)) return true;
  for (const Process& q : tl.processes)
    if (has_main_stage_time(q)) return false;
  return true;
}

}  // namespace

void draw_breakdown_panel(App& app) {
  const Timeline& tl = app.tl;
  ImGui::TextUnformatted("Step time per rank");
  ImGui::Separator();
  double scale = 0;
  for (const Process& p : tl.processes) scale = std::max(scale, step_mean_ns(p));
  bool any = false;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float bar_w = std::max(50.0f, ImGui::GetContentRegionAvail().x - 10);
  for (const Process& p : tl.processes) {
    if (p.steps.empty() || scale <= 0 || !shown_in_breakdown(tl, p)) continue;
    any = true;
    const double n = static_cast<double>(p.steps.size());
    const double mean = step_mean_ns(p);
    ImGui::Text("%s: %.2f ms/step over %zu steps", p.name.c_str(), mean / 1e6, p.steps.size());
    ImVec2 a = ImGui::GetCursorScreenPos();
    float x = a.x;
    double accounted = 0;
    for (Stage s : kMainStages) {
      double ns = static_cast<double>(p.stages[static_cast<int>(s)].total_ns) / n;
      if (ns <= 0) continue;
      accounted += ns;
      float w = static_cast<float>(ns / scale) * bar_w;
      dl->AddRectFilled(ImVec2(x, a.y), ImVec2(x + w, a.y + 16), stage_color(s));
      if (ImGui::IsMouseHoveringRect(ImVec2(x, a.y), ImVec2(x + w, a.y + 16)))
        ImGui::SetTooltip("%s: %.3f ms per step (%.1f%%)", std::string(stage_name(s)).c_str(), ns / 1e6,
                          100.0 * ns / std::max(mean, 1.0));
      x += w;
    }
    double other = std::max(0.0, mean - accounted);
    float w = static_cast<float>(other / scale) * bar_w;
    dl->AddRectFilled(ImVec2(x, a.y), ImVec2(x + w, a.y + 16), IM_COL32(110, 110, 110, 255));
    if (ImGui::IsMouseHoveringRect(ImVec2(x, a.y), ImVec2(x + w, a.y + 16)))
      ImGui::SetTooltip("other (untracked main-thread time): %.3f ms per step", other / 1e6);
    ImGui::Dummy(ImVec2(bar_w, 18));
  }
  if (!any) {
    ImGui::TextDisabled("no steps in this trace (step spans, step args or ProfilerStep#N)");
  } else {
    // legend
    for (Stage s : kMainStages) {
      ImVec2 a = ImGui::GetCursorScreenPos();
      dl->AddRectFilled(ImVec2(a.x, a.y + 3), ImVec2(a.x + 10, a.y + 13), stage_color(s));
      ImGui::Dummy(ImVec2(12, 14));
      ImGui::SameLine();
      ImGui::TextUnformatted(std::string(stage_name(s)).c_str());
      ImGui::SameLine();
    }
    ImGui::NewLine();
  }
  // every stage with time, per process: ms per step (or total when there are no steps)
  std::vector<const Process*> shown;  // processes with any stage time
  for (const Process& p : tl.processes) {
    bool has = false;
    for (const StageStat& st : p.stages) has |= st.count > 0;
    if (has && shown_in_breakdown(tl, p)) shown.push_back(&p);
  }
  int cols = 1 + static_cast<int>(shown.size());
  if (cols > 1 && cols <= 64 &&
      ImGui::BeginTable("stages", cols, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY)) {
    ImGui::TableSetupColumn(any ? "stage (ms/step)" : "stage (ms total)");
    for (const Process* p : shown) ImGui::TableSetupColumn(p->name.c_str());
    ImGui::TableHeadersRow();
    for (int s = 0; s < kStageCount; ++s) {
      bool has = false;
      for (const Process* p : shown) has |= p->stages[s].count > 0;
      if (!has) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(stage_color(static_cast<Stage>(s))), "%s",
                         std::string(stage_name(static_cast<Stage>(s))).c_str());
      for (const Process* p : shown) {
        ImGui::TableNextColumn();
        double div = any && !p->steps.empty() ? static_cast<double>(p->steps.size()) : 1.0;
        ImGui::Text("%.3f", static_cast<double>(p->stages[s].total_ns) / div / 1e6);
      }
    }
    ImGui::EndTable();
  }
}

}  // namespace ddp::viewer
