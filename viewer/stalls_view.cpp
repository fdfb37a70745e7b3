// Stalls: the analysis' root causes, ranked by time lost; clicking one jumps the timeline to its worst instance.
// A run folder is analysed in process (traces/analysis/analysis.h); a Chrome trace uses an analysis.json next to it.
#include <imgui.h>

#include <fstream>

#include "traces/analysis/analysis.h"
#include "viewer/app.h"

namespace ddp::viewer {

// A cause or flag of every rank at once (the analysis says rank -1) reads "all ranks", not "rank -1".
std::string who_label(int rank) { return rank < 0 ? std::string("all ranks") : "rank " + std::to_string(rank); }

void load_stalls_for_run(App& app, const RunTrace& run) { load_stalls(app, run, analyze(run)); }

void load_stalls(App& app, const RunTrace& run, const Analysis& a) {
  app.stalls.clear();
  for (const StallCause& c : a.causes) {
    StallItem s;
    s.rank = c.rank;
    s.stage = c.stage;
    s.lost_ms = c.lost_ms;
    s.share = c.share;
    s.text = c.explanation.empty() ? c.evidence.dump() : c.explanation;
    s.has_time = true;
    s.at_ns = c.at_ns + run.origin_ns() - app.tl.origin_ns;  // the analysis counts from the run's first stage span
    s.at_step = c.at_step;
    app.stalls.push_back(std::move(s));
  }
  app.stall_flags.clear();
  for (const StallFlag& f : a.flags) app.stall_flags.push_back(f.id + " (" + who_label(f.rank) + "): " + f.message);
  app.stall_verdict = a.verdict;
  app.stall_source = "analysis of " + std::to_string(a.steps) + " steps";
}

bool load_stalls_json(App& app, const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error = path + " is not valid JSON";
    return false;
  }
  app.stalls.clear();
  app.stall_flags.clear();
  auto num = [](const nlohmann::json& o, const char* k, double d) {
    auto it = o.find(k);
    return it != o.end() && it->is_number() ? it->get<double>() : d;
  };
  auto causes = j.find("causes");
  if (causes != j.end() && causes->is_array()) {
    for (const auto& c : *causes) {
      if (!c.is_object()) continue;
      StallItem s;
      s.rank = static_cast<int>(num(c, "rank", -1));
      auto st = c.find("stage");
      if (st != c.end() && st->is_string()) s.stage = st->get<std::string>();
      s.lost_ms = num(c, "lost_ms", 0);
      s.share = num(c, "share", 0);
      auto ex = c.find("explanation");
      auto ev = c.find("evidence");
      if (ex != c.end() && ex->is_string())
        s.text = ex->get<std::string>();
      else if (ev != c.end())
        s.text = ev->dump();
      for (const char* k : {"at_ns", "t0_ns"})
        if (c.contains(k) && c[k].is_number()) {
          s.has_time = true;
          s.at_ns = c[k].get<int64_t>();
        }
      s.at_step = static_cast<int64_t>(num(c, "at_step", -1));
      app.stalls.push_back(std::move(s));
    }
  }
  auto flags = j.find("flags");
  if (flags != j.end() && flags->is_array())
    for (const auto& f : *flags) {
      if (f.is_string()) {
        app.stall_flags.push_back(f.get<std::string>());
      } else if (f.is_object()) {
        std::string id = f.value("id", std::string("flag"));
        std::string msg =
            f.contains("message") && f["message"].is_string() ? f["message"].get<std::string>() : f.dump();
        app.stall_flags.push_back(id + ": " + msg);
      }
    }
  if (j.contains("verdict") && j["verdict"].is_string()) app.stall_verdict = j["verdict"].get<std::string>();
  app.stall_source = path;
  return true;
}

void draw_stalls_panel(App& app) {
  ImGui::TextUnformatted("Stalls: root causes");
  ImGui::Separator();
  if (app.analysis_pending()) {  // the timeline is shown before its analysis ends
    ImGui::TextDisabled("analysing the run ...");
    return;
  }
  if (!app.stall_verdict.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted(app.stall_verdict.c_str());
    ImGui::PopTextWrapPos();
  }
  if (app.stalls.empty())
    ImGui::TextDisabled("no stall causes%s%s", app.stall_source.empty() ? "" : ": ", app.stall_source.c_str());
  for (size_t i = 0; i < app.stalls.size(); ++i) {
    const StallItem& s = app.stalls[i];
    char label[160];
    std::snprintf(label, sizeof(label), "%5.1f%%  %8.2f ms  %s  %s##cause%zu", 100.0 * s.share, s.lost_ms,
                  who_label(s.rank).c_str(), s.stage.c_str(), i);
    auto st = stage_from_name(s.stage);
    ImGui::PushStyleColor(ImGuiCol_Text, st ? ImGui::ColorConvertU32ToFloat4(stage_color(*st)) : ImVec4(1, 1, 1, 1));
    if (ImGui::Selectable(label)) app.jump_to(s);
    ImGui::PopStyleColor();
    if (ImGui::IsItemHovered() && !s.text.empty()) {
      ImGui::BeginTooltip();
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 35);
      ImGui::TextUnformatted(s.text.c_str());
      ImGui::TextDisabled("click: jump to the worst instance");
      ImGui::PopTextWrapPos();
      ImGui::EndTooltip();
    }
  }
  if (!app.stall_flags.empty()) {
    ImGui::Separator();
    ImGui::TextUnformatted("Flags");
    ImGui::PushTextWrapPos(0);
    for (const auto& f : app.stall_flags) ImGui::BulletText("%s", f.c_str());
    ImGui::PopTextWrapPos();
  }
}

}  // namespace ddp::viewer
