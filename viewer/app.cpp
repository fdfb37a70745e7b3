#include "viewer/app.h"

#include <imgui.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <new>
#include <set>

#include "traces/analysis/analysis.h"
#include "traces/flight_recorder/fr_dump.h"
#include "traces/kineto/kineto_import.h"
#include "traces/native/load_run.h"
#include "traces/timeline/timeline_kineto.h"

namespace ddp::viewer {
namespace {
constexpr int kAnalysisNice = 10;  // the analysis of per-rank traces, made while the timeline finishes
}  // namespace

namespace {

// The first step both runs hold and where it starts on rank 0's clock in each: INT64_MIN when they share none.
std::pair<int64_t, int64_t> first_common_step(const RunTrace& a, const RunTrace& b) {
  auto starts = [](const RunTrace& run) {
    std::map<uint32_t, int64_t> at;
    for (const RankTrace& t : run.ranks)
      for (const Event& e : t.events)
        if (e.is_span() && e.stage_id() == Stage::step) {
          auto [it, fresh] = at.emplace(e.step, e.t0 + t.clock_offset_ns());
          if (!fresh) it->second = std::min(it->second, e.t0 + t.clock_offset_ns());
        }
    return at;
  };
  const auto sa = starts(a), sb = starts(b);
  for (const auto& [step, t] : sa)
    if (sb.count(step)) return {t, sb.at(step)};
  return {INT64_MIN, INT64_MIN};
}

// The predicted run's ranks added to the measured run's, lane by lane: rank R's predicted lanes follow its own as
// "predicted <lane>", its events moved onto the measured rank's clock (the predicted run is on rank 0's) and shifted
// so that the first step both hold starts at once in each (the pair read step against step from there).
bool add_beside(RunTrace& run, const std::string& dir, const StepWindow& steps, std::string& error) {
  RunTrace predicted;
  if (!load_run(dir, predicted, error) || !keep_steps(predicted, steps, error)) {
    error = "--beside " + dir + ": " + error;
    return false;
  }
  const auto [measured_first, predicted_first] = first_common_step(run, predicted);
  const int64_t align = measured_first == INT64_MIN ? 0 : measured_first - predicted_first;
  size_t matched = 0;
  for (RankTrace& measured : run.ranks)
    for (const RankTrace& p : predicted.ranks) {
      if (p.rank != measured.rank) continue;
      if (measured.lanes.size() + p.lanes.size() > 256) {
        error = "--beside: rank " + std::to_string(p.rank) + " has too many lanes to draw both";
        return false;
      }
      const auto base = static_cast<uint8_t>(measured.lanes.size());
      for (const std::string& lane : p.lanes) measured.lanes.push_back("predicted " + lane);
      const int64_t shift = align + p.clock_offset_ns() - measured.clock_offset_ns();
      for (Event e : p.events) {
        e.lane = static_cast<uint8_t>(e.lane + base);
        e.t0 += shift, e.t1 += shift;
        measured.events.push_back(e);
      }
      ++matched;
    }
  if (matched == 0) {
    error = "--beside " + dir + ": none of its ranks is one of " + run.dir + "'s (is it a prediction of this run?)";
    return false;
  }
  return true;
}

}  // namespace

bool App::load(const std::string& path, std::string& error, const LoadOptions& opts) {
  std::error_code ec;
  if (!opts.beside.empty() && !(std::filesystem::is_directory(path, ec) && !is_fr_input({path}))) {
    error = "--beside draws a predicted run with the run folder it predicts: " + path + " is not a run folder";
    return false;
  }
  if (std::filesystem::is_directory(path, ec) && !is_fr_input({path})) {
    RunTrace run;
    if (!load_run(path, run, error) || !keep_steps(run, opts.steps, error)) return false;
    try {
      if (!opts.beside.empty()) {
        // The stalls panel keeps the measured run's analysis; the timeline holds both.
        load_stalls_for_run(*this, run);
        RunTrace both = run;
        if (!add_beside(both, opts.beside, opts.steps, error)) return false;
        set_timeline(timeline_from_run(both));
        return true;
      }
      set_timeline(timeline_from_run(run));
    } catch (const std::bad_alloc&) {
      error = "out of memory while building the timeline of " + path;
      return false;
    }
    load_stalls_for_run(*this, run);
    return true;
  }
  if (!opts.steps.everything() || opts.cycle > 0) {
    error = "--steps and --cycle apply to run folders and per-rank PyTorch profiler traces, not to one trace file";
    return false;
  }
  Timeline t;
  if (!load_timeline(path, t, error)) return false;
  set_timeline(std::move(t));
  if (is_fr_input({path})) {
    stall_source = "Flight Recorder dumps: no stalls; where the ranks part is the first load note";
    return true;
  }
  // stalls of a Chrome trace: an analysis.json next to it, when there is one
  std::filesystem::path side = std::filesystem::path(path).parent_path() / "analysis.json";
  std::string err;
  if (std::filesystem::exists(side, ec)) {
    if (!load_stalls_json(*this, side.string(), err)) stall_source = err;
  } else {
    stall_source =
        "no analysis: open a run folder, or put analysis.json (ddp_profile --analyze DIR --json) next to "
        "the trace";
  }
  return true;
}

bool App::opens_as_kineto_run(const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (is_fr_input(inputs)) return false;  // Flight Recorder dumps: load_timeline's
  return inputs.size() > 1 || (is_kineto_input(inputs) && std::filesystem::is_directory(inputs.front(), ec));
}

bool App::load(const std::vector<std::string>& inputs, const KinetoStageMap& map, std::string& error,
               const LoadOptions& opts) {
  if (inputs.size() > 1 && is_fr_input(inputs)) {  // dump files named one by one
    Timeline t;
    if (!timeline_from_fr_dumps(inputs, t, error)) return false;
    set_timeline(std::move(t));
    stall_source = "Flight Recorder dumps: no stalls; where the ranks part is the first load note";
    return true;
  }
  if (!opts.beside.empty() && inputs.size() != 1) {
    error = "--beside draws a predicted run with the one run folder it predicts";
    return false;
  }
  if (!opens_as_kineto_run(inputs) || !opts.beside.empty()) {
    if (inputs.empty()) {
      error = "nothing to open";
      return false;
    }
    if (opts.cycle > 0) {
      error = "--cycle applies to per-rank PyTorch profiler traces";
      return false;
    }
    return load(inputs.front(), error, opts);
  }
  auto run = std::make_shared<RunTrace>();
  // Each file read once, the timeline built in the import's reading; with --steps the window's files are read again
  // for only the window's events (the window is known once the steps are read).
  KinetoTimelineParts parts;
  const KinetoFileEvents each_file = parts.reader();
  if (!load_kineto_run(inputs, map, *run, error, opts.cycle, opts.steps.everything() ? &each_file : nullptr) ||
      !keep_steps(*run, opts.steps, error))
    return false;
  // The analysis (the stalls panel) and the timeline each only read the run: made side by side, and the timeline
  // shown without waiting for the analysis (take_analysis). The timeline's finish is what the user waits for, on a
  // thread per rank: the analysis yields the cores to it (at nice 10; once the timeline is up it has one to itself).
  std::future<Analysis> analysis = std::async(std::launch::async, [run] {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()),
                  kAnalysisNice);  // best effort: a failure changes nothing
    return analyze(*run);
  });
  Timeline t;
  if (!timeline_from_kineto_run(*run, parts, t, error)) return false;  // the analysis' future waits for it
  set_timeline(std::move(t));
  clock_report = kineto_report_text(*run);
  analysed_run_ = std::move(run);
  pending_analysis_ = std::move(analysis);
  return true;
}

void App::take_analysis(bool wait) {
  if (!pending_analysis_.valid()) return;
  if (!wait && pending_analysis_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  const std::shared_ptr<const RunTrace> run = std::move(analysed_run_);
  try {
    const Analysis a = pending_analysis_.get();
    load_stalls(*this, *run, a);
  } catch (const std::bad_alloc&) {  // the timeline is shown; the panel says why it has no causes
    stall_source = "no analysis: out of memory while analysing the run";
  } catch (const std::exception& e) {
    stall_source = std::string("no analysis: ") + e.what();
  }
}

void App::set_timeline(Timeline t) {
  if (pending_analysis_.valid()) pending_analysis_.wait();  // an analysis of the timeline replaced: not shown
  pending_analysis_ = {};
  analysed_run_.reset();
  tl = std::move(t);
  overview = build_rank_overview(tl);
  // Only ranks count: one trace's processes (a CPU process and its GPU streams) are one job's, shown whole.
  const bool few = static_cast<size_t>(std::count_if(overview.ranks.begin(), overview.ranks.end(),
                                                     [](int r) { return r >= 0; })) <= kRanksShownExpanded;
  expanded.assign(tl.processes.size(), few ? 1 : 0);
  summary_lane.assign(tl.processes.size(), 0);
  summary_row.assign(tl.processes.size(), 0);
  rank_head.assign(tl.processes.size(), 1);
  std::set<int> ranks_seen;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const Process& p = tl.processes[pi];
    if (p.rank >= 0 && !ranks_seen.insert(p.rank).second) rank_head[pi] = 0;
    if (p.lanes.empty()) continue;
    for (size_t li = 0; li < p.lanes.size(); ++li)
      if (p.lanes[li].span_count > p.lanes[summary_lane[pi]].span_count) summary_lane[pi] = li;
    // The step spans (ours, ProfilerStep#N) say only where steps are: the row below them says what the rank did.
    const std::vector<Row>& rows = p.lanes[summary_lane[pi]].rows;
    for (size_t ri = 0; ri < rows.size(); ++ri)
      if (!rows[ri].spans.empty() && rows[ri].spans.front().stage != static_cast<uint8_t>(Stage::step)) {
        summary_row[pi] = ri;
        break;
      }
  }
  scroll_to_process = -1;
  view.set_data_range(tl.t_begin, tl.t_end);
  view.fit_all();
  sel = Selection{};
  stats_valid = false;
  stalls.clear();
  stall_flags.clear();
  stall_verdict.clear();
  clock_report.clear();
}

void App::go_to_step(int64_t step) {
  int64_t a = 0, b = 0;
  if (step >= 0 && step < static_cast<int64_t>(kNoStep) && tl.step_range(static_cast<uint32_t>(step), a, b)) {
    view.fit(a, b, 0.05);
    status = "step " + std::to_string(step);
  } else {
    status = "step " + std::to_string(step) + " is not in the trace";
  }
}

void App::show_rank_step(size_t step_row, size_t rank_col) {
  if (step_row >= overview.steps.size() || rank_col >= overview.ranks.size()) return;
  const OverviewCell& c = overview.at(step_row, rank_col);
  view.fit(overview.step_t0[step_row], overview.step_t1[step_row], 0.05);
  const int rank = overview.ranks[rank_col];
  set_rank_expanded(overview.process[rank_col], true);
  scroll_to_process = static_cast<int64_t>(overview.process[rank_col]);
  char buf[160];
  const std::string who = rank >= 0 ? who_label(rank) : tl.processes[overview.process[rank_col]].name;
  std::snprintf(buf, sizeof buf, "%s step %u: busy %s, %.2fx the median rank", who.c_str(), overview.steps[step_row],
                format_duration(c.own_ns).c_str(), static_cast<double>(c.score));
  status = buf;
}

void App::set_rank_expanded(size_t process, bool open) {
  if (process >= tl.processes.size()) return;
  const int rank = tl.processes[process].rank;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi)
    if (pi == process || (rank >= 0 && tl.processes[pi].rank == rank)) expanded[pi] = open ? 1 : 0;
}

void App::jump_to(const StallItem& s) {
  int64_t a = 0, b = 0;
  if (s.at_step >= 0 && tl.step_range(static_cast<uint32_t>(s.at_step), a, b)) {
    view.fit(a, b, 0.05);
  } else if (s.has_time) {
    int64_t w = std::max<int64_t>(view.span() / 8, 1'000'000);
    view.fit(s.at_ns - w / 2, s.at_ns + w / 2);
  }
  status = "cause: rank " + std::to_string(s.rank) + " " + s.stage;
}

namespace {

void toolbar(App& app) {
  const Timeline& tl = app.tl;
  ImGui::TextUnformatted(tl.source.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("| %s | %zu processes | %llu spans | %llu counter samples | %s",
                      tl.producer.empty() ? "chrome trace" : tl.producer.c_str(), tl.processes.size(),
                      static_cast<unsigned long long>(tl.span_count),
                      static_cast<unsigned long long>(tl.counter_samples),
                      format_duration(tl.t_end - tl.t_begin).c_str());
  if (ImGui::Button("Fit")) app.view.fit_all();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  bool go = ImGui::InputInt("##step", &app.goto_step, 1, 10, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Go to step") || go) app.go_to_step(app.goto_step);
  ImGui::SameLine();
  ImGui::Checkbox("Highlight waits", &app.opt.highlight_waits);
  ImGui::SameLine();
  ImGui::Checkbox("Counters", &app.opt.show_counters);
  ImGui::SameLine();
  ImGui::Checkbox("Step marks", &app.opt.show_step_marks);
  ImGui::SameLine();
  ImGui::TextDisabled(
      "view %s  (%s / px)", format_duration(app.view.span()).c_str(),
      format_duration(static_cast<int64_t>(app.view.ns_per_px(ImGui::GetContentRegionAvail().x))).c_str());
  if (!app.status.empty()) {
    ImGui::SameLine();
    ImGui::TextUnformatted(app.status.c_str());
  }
  if (!app.clock_report.empty()) {
    ImGui::TextDisabled("ranks on one clock (hover: offsets)");
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::TextUnformatted(app.clock_report.c_str());
      ImGui::EndTooltip();
    }
    if (!tl.problems.empty()) ImGui::SameLine();
  }
  if (!tl.problems.empty()) {
    ImGui::TextColored(ImVec4(1.0f, 0.6f, 0.2f, 1.0f), "%zu problem(s): %s", tl.problems.size(),
                       tl.problems.front().c_str());
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      for (const auto& p : tl.problems) ImGui::TextUnformatted(p.c_str());
      ImGui::EndTooltip();
    }
  }
}

}  // namespace

void App::frame(float width, float height) {
  take_analysis(false);
  last = FrameInfo{};
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(width, height));
  ImGui::Begin("ddp_viewer", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  toolbar(*this);
  draw_overview(*this, ImGui::GetContentRegionAvail().x);
  const float panels_h = std::max(150.0f, ImGui::GetContentRegionAvail().y * 0.34f);
  const float timeline_h =
      std::max(100.0f, ImGui::GetContentRegionAvail().y - panels_h - ImGui::GetStyle().ItemSpacing.y);
  draw_timeline(*this, ImGui::GetContentRegionAvail().x, timeline_h);

  // bottom panels side by side
  const float avail = ImGui::GetContentRegionAvail().x;
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  const float w = (avail - 3 * spacing) / 4;
  const float h = ImGui::GetContentRegionAvail().y;
  ImGui::BeginChild("breakdown", ImVec2(w * 1.2f, h), true);
  draw_breakdown_panel(*this);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("stalls", ImVec2(w * 1.2f, h), true);
  draw_stalls_panel(*this);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("stats", ImVec2(w * 0.8f, h), true);
  draw_stats_panel(*this);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("memory", ImVec2(0, h), true);
  draw_memory_panel(*this);
  ImGui::EndChild();
  ImGui::End();
}

}  // namespace ddp::viewer
