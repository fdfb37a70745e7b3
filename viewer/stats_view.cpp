// Statistics of the selected span kind (click a span): count, total, mean and percentiles, per process.
#include <imgui.h>

#include "viewer/app.h"

namespace ddp::viewer {

void draw_stats_panel(App& app) {
  ImGui::TextUnformatted("Selection");
  ImGui::Separator();
  if (!app.sel.active) {
    ImGui::TextDisabled("click a span to see statistics of its kind");
    return;
  }
  const Timeline& tl = app.tl;
  if (app.sel.process >= tl.processes.size()) {
    app.sel.active = false;
    return;
  }
  const Process& p = tl.processes[app.sel.process];
  const Span& s = p.lanes[app.sel.lane].rows[app.sel.row].spans[app.sel.index];
  if (!app.stats_valid || app.stats_name != app.sel.name) {
    app.stats_name = app.sel.name;
    app.stats_all = span_stats(tl, app.sel.name);
    app.stats_per_process.clear();
    for (size_t i = 0; i < tl.processes.size(); ++i)
      app.stats_per_process.push_back(span_stats(tl, app.sel.name, static_cast<int>(i)));
    app.stats_valid = true;
  }
  std::string_view n = tl.name(s);
  ImGui::PushTextWrapPos(0);
  ImGui::Text("%.*s", static_cast<int>(std::min<size_t>(n.size(), 200)), n.data());
  ImGui::PopTextWrapPos();
  ImGui::Text("this one: %s at %s", format_duration(s.duration()).c_str(), format_duration(s.t0).c_str());
  if (s.step != kNoStep) ImGui::Text("step %u", s.step);
  if (ImGui::SmallButton("Zoom to it")) app.view.fit(s.t0, s.t1(), 0.25);
  ImGui::Separator();
  if (ImGui::BeginTable("stats", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders)) {
    for (const char* h : {"where", "count", "total", "mean", "p50/p90", "max"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    auto row = [](const char* where, const SpanStats& st) {
      if (st.count == 0) return;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(where);
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(st.count));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_duration(st.total_ns).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_duration(static_cast<int64_t>(st.mean_ns)).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s / %s", format_duration(static_cast<int64_t>(st.p50_ns)).c_str(),
                  format_duration(static_cast<int64_t>(st.p90_ns)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_duration(st.max_ns).c_str());
    };
    row("all", app.stats_all);
    for (size_t i = 0; i < app.stats_per_process.size(); ++i)
      row(tl.processes[i].name.c_str(), app.stats_per_process[i]);
    ImGui::EndTable();
  }
  if (app.stats_all.bytes)
    ImGui::Text("bytes: %s in total", format_bytes(static_cast<double>(app.stats_all.bytes)).c_str());
}

}  // namespace ddp::viewer
