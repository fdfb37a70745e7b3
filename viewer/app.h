#pragma once
// The viewer application state and the frame builder. Everything here builds ImGui draw lists and needs no GL, so
// tests and benchmarks drive whole frames headless (an ImGui context with a built font atlas is enough).
#include <array>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "traces/analysis/analysis_types.h"
#include "traces/kineto/kineto_map.h"
#include "traces/model/run_trace.h"
#include "traces/model/step_window.h"
#include "traces/timeline/rank_overview.h"
#include "traces/timeline/timeline.h"
#include "viewer/view_state.h"

struct ImDrawList;

namespace ddp::viewer {

// "rank R", or "all ranks" for a cause or flag of every rank at once (the analysis' rank -1).
std::string who_label(int rank);

// One root cause of a stall, as the stalls panel lists it (from traces/analysis/analysis.h or an analysis.json file).
struct StallItem {
  int rank = -1;
  std::string stage;
  double lost_ms = 0;
  double share = 0;
  std::string text;  // explanation / evidence
  bool has_time = false;
  int64_t at_ns = 0;  // on the timeline's clock
  int64_t at_step = -1;
};

struct Selection {
  bool active = false;
  size_t process = 0, lane = 0, row = 0;
  uint32_t index = 0;
  uint32_t name = 0;
};

// What of the inputs to open: --cycle N (per-rank traces of several profiling cycles) and --steps A-B.
struct LoadOptions {
  int cycle = 0;  // 0: every cycle
  StepWindow steps;
  // A predicted run (ddp_profile --what-if EDIT RUN -o DIR) drawn with the run folder it predicts: each rank's
  // predicted lanes ("predicted main", ...) under its measured ones, on one clock.
  std::string beside;
};

struct Options {
  bool highlight_waits = true;
  bool show_counters = true;
  bool show_step_marks = true;
  float min_px = 2.0f;  // spans narrower than this merge
};

// What the last frame drew (for tests, benchmarks and the status line).
struct FrameInfo {
  uint64_t boxes = 0;
  uint64_t merged_boxes = 0;
  uint64_t spans_in_merged = 0;
  uint64_t labels = 0;
  uint64_t overview_rects = 0;
  uint64_t cpu_strips = 0;  // spans drawn with their CPU split
};

class App {
 public:
  // A run folder or a Chrome trace (.json / .json.gz). False with `error` set when it cannot be shown.
  bool load(const std::string& path, std::string& error, const LoadOptions& opts = {});
  // Several inputs, or one folder of per-rank PyTorch profiler traces: the ranks on one clock with every event, and
  // the stalls of their analysis. `map` holds the user's --map rules. Other single inputs go to load(path).
  bool load(const std::vector<std::string>& inputs, const KinetoStageMap& map, std::string& error,
            const LoadOptions& opts = {});
  // True when load(inputs, ...) opens them as per-rank PyTorch profiler traces.
  static bool opens_as_kineto_run(const std::vector<std::string>& inputs);
  void set_timeline(Timeline tl);

  // Per-rank traces: load() returns once the timeline is built, while the run's analysis may still be running (on
  // 2 x 10 M events it ends ~0.5 s after the timeline): the timeline is on screen meanwhile, the stalls panel says
  // it is analysing, and the first frame after the analysis ends takes it (frame() calls take_analysis).
  bool analysis_pending() const { return pending_analysis_.valid(); }
  // Moves a finished analysis into the stalls panel; with `wait`, waits for it first (headless use, tests).
  void take_analysis(bool wait);

  // Builds one ImGui frame covering `width` x `height` (call between ImGui::NewFrame and ImGui::Render).
  void frame(float width, float height);

  void go_to_step(int64_t step);
  void jump_to(const StallItem& s);
  // The overview's cell (step row, rank column): that step fitted, that rank's processes expanded and scrolled to.
  void show_rank_step(size_t step_row, size_t rank_col);
  bool is_expanded(size_t process) const { return process < expanded.size() && expanded[process]; }
  // Expands or collapses every process of `process`'s rank (a Kineto rank's CPU, GPU and stage processes together).
  void set_rank_expanded(size_t process, bool open);

  // Above this many ranks every rank starts collapsed to one row (its first process's summary row), so that 1024
  // ranks are 1024 rows; each expands on a click of its row or of the overview.
  static constexpr size_t kRanksShownExpanded = 4;

  Timeline tl;
  RankOverview overview;             // ranks x steps (traces/timeline/rank_overview.h), built with the timeline
  std::vector<uint8_t> expanded;     // per process: 1 draws its header and every lane, 0 (a collapsed rank) one row
  std::vector<uint8_t> rank_head;    // per process: the first of its rank's (the one a collapsed rank shows)
  std::vector<size_t> summary_lane;  // per process: the lane its collapsed row shows (the one with most spans)
  std::vector<size_t> summary_row;   // ... and the row: the first below the step spans
  int overview_colour = 0;           // 0: busy time against the median rank, 1: the dominant stage
  int64_t scroll_to_process = -1;    // the next frame scrolls the tracks to this process
  ViewState view;
  Selection sel;
  Options opt;
  FrameInfo last;
  std::vector<StallItem> stalls;
  std::vector<std::string> stall_flags;
  std::string stall_verdict;
  std::string stall_source;  // where the causes came from ("analysis of the run", a file, or why there are none)
  std::string clock_report;  // per-rank Kineto traces: how their clocks were aligned (traces/kineto/kineto_import.h)
  std::string status;        // one line shown in the toolbar (e.g. "step 12 not in trace")
  int goto_step = 0;

  // timeline interaction: a press in the tracks becomes a pan (drag) or a selection (click)
  bool press_in_tracks = false;
  bool dragged = false;

  // Statistics of the selected span kind, cached by name.
  bool stats_valid = false;
  uint32_t stats_name = 0;
  SpanStats stats_all;
  std::vector<SpanStats> stats_per_process;

 private:
  std::shared_ptr<const RunTrace> analysed_run_;  // what the pending analysis reads, kept until it is taken
  std::future<Analysis> pending_analysis_;
};

// A span's wall time in its CPU split's three parts (CpuPart order), in microseconds: on a CPU, waiting for a core
// (0 when not known) and the rest, blocked (traces/model/span_cpu.h's blocked_us: a wait not known is in it).
struct CpuParts {
  std::array<uint32_t, kCpuPartCount> us{};
  bool wait_known = true;
  uint64_t total() const { return uint64_t{us[0]} + us[1] + us[2]; }
};
CpuParts cpu_parts(const SpanCpuSplit& c, int64_t wall_ns);  // timeline_view.cpp
// "on CPU 5.000 ms, waiting for a core 2.000 ms, blocked 3.000 ms" (the wait "not known" when it is not).
std::string cpu_split_text(const SpanCpuSplit& c, int64_t wall_ns);  // timeline_view.cpp

// Views, one file each.
void draw_timeline(App& app, float width, float height);  // timeline_view.cpp
float overview_height(const App& app);                    // overview_view.cpp
void draw_overview(App& app, float width);                // overview_view.cpp
float draw_counter_tracks(App& app, const Process& p, ImDrawList* dl, float x_label, float x0, float width,
                          float y);                             // counters_view.cpp
float counter_tracks_height(const App& app, const Process& p);  // counters_view.cpp
void draw_memory_panel(App& app);                               // counters_view.cpp
void draw_stats_panel(App& app);                                // stats_view.cpp
void draw_breakdown_panel(App& app);                            // breakdown_view.cpp
void draw_stalls_panel(App& app);                               // stalls_view.cpp
// Loads the stalls of a run folder (analysis of the run) or next to a Chrome trace (analysis.json).
void load_stalls_for_run(App& app, const RunTrace& run);                       // stalls_view.cpp
void load_stalls(App& app, const RunTrace& run, const Analysis& a);            // the run's analysis, made already
bool load_stalls_json(App& app, const std::string& path, std::string& error);  // stalls_view.cpp

// Writes RGBA pixels (rows bottom-up, as glReadPixels returns them) as a PNG. png_writer.cpp
bool write_png(const std::string& path, int width, int height, const uint8_t* rgba_bottom_up, std::string& error);

}  // namespace ddp::viewer
