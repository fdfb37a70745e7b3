// ddp_viewer PATH... [--map REGEX=STAGE]... [--cycle N] [--steps A-B] [--screenshot FILE.png] [--frames N]
//            [--width W] [--height H]
// PATH is a run folder, a Chrome trace (.json / .json.gz), or per-rank PyTorch profiler traces (several files, or a
// folder of them) shown as one run on one clock. Exit codes: 0 ok, 1 unreadable input or no display, 2 usage error.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define GL_SILENCE_DEPRECATION
#include <GLFW/glfw3.h>
#include <imgui.h>

#include "backends/imgui_impl_glfw.h"
#include "backends/imgui_impl_opengl3.h"
#include "ddp_profile_version.h"
#include "traces/base/read_progress.h"
#include "traces/base/stats.h"
#include "traces/kineto/kineto_import.h"
#include "viewer/app.h"

namespace {

constexpr const char* kUsage =
    "usage: ddp_viewer PATH... [--map REGEX=STAGE]... [--cycle N] [--steps A-B] [--beside DIR] [--screenshot "
    "FILE.png]\n"
    "                  [--frames N] [--width W] [--height H]   |   ddp_viewer --version\n"
    "  PATH  a run folder (rank<R>.ddpt files) or a Chrome trace JSON (.json or .json.gz; ours or PyTorch profiler);\n"
    "        several PyTorch profiler traces, one per rank (the files, or a folder of them): all ranks on one clock\n"
    "  --map REGEX=STAGE  with PyTorch profiler traces: events whose name matches are that stage (docs/kineto.md)\n"
    "  --cycle N          with per-rank traces of several profiling cycles: only cycle N (1-based)\n"
    "  --steps A-B        only steps A to B (a run folder or per-rank traces): a big trace a few steps at a time\n"
    "  --beside DIR       with a run folder: its predicted run (ddp_profile --what-if EDIT RUN -o DIR) drawn under\n"
    "                     each rank's measured lanes\n";

int usage(const std::string& why) {
  std::fprintf(stderr, "ddp_viewer: %s\n%s", why.c_str(), kUsage);
  return 2;
}

bool parse_int(const char* s, int lo, int hi, int& out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!end || *end || end == s || v < lo || v > hi) return false;
  out = static_cast<int>(v);
  return true;
}

// The loading screen: which file is being read and how far the reading is.
void draw_loading(const std::string& what, float width, float height) {
  const ddp::ReadProgress& p = ddp::trace_read_progress();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(width, height));
  ImGui::Begin("loading", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove);
  ImGui::Text("loading %s", what.c_str());
  const std::string file = p.file();
  ImGui::Text("reading %s: %.2f of about %.2f GB", file.empty() ? "..." : file.c_str(), p.done() / 1e9,
              p.total() / 1e9);
  ImGui::ProgressBar(static_cast<float>(p.fraction()), ImVec2(std::min(width - 20.0f, 800.0f), 0));
  ImGui::End();
}

// One ImGui frame built by `build` and drawn into the back buffer (the caller swaps, after reading pixels if it
// wants them): the loading screen and the viewer's frames alike. `fb_w`/`fb_h`: the framebuffer's size.
template <class Build>
void render_frame(GLFWwindow* window, Build build, int& fb_w, int& fb_h) {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGui::NewFrame();
  glfwGetFramebufferSize(window, &fb_w, &fb_h);
  build();
  ImGui::Render();
  glViewport(0, 0, fb_w, fb_h);
  glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void shut_down(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

void glfw_error(int code, const char* what) { std::fprintf(stderr, "ddp_viewer: GLFW error %d: %s\n", code, what); }

}  // namespace

// The command line: -1 to go on, else the exit code (help printed, or a usage error said).
struct ViewerArgs {
  std::vector<std::string> paths;
  std::string screenshot;
  ddp::KinetoStageMap map;
  bool maps = false;
  ddp::viewer::LoadOptions load_opts;
  int frames = 3, width = 1600, height = 900;
};

int parse_args(int argc, char** argv, ViewerArgs& args) {
  std::vector<std::string>& paths = args.paths;
  std::string& screenshot = args.screenshot;
  ddp::KinetoStageMap& map = args.map;
  bool& maps = args.maps;
  ddp::viewer::LoadOptions& load_opts = args.load_opts;
  int &frames = args.frames, &width = args.width, &height = args.height;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)name;
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("ddp_viewer %s\n", ddp::kVersion);
      return 0;
    } else if (a == "--screenshot") {
      const char* v = value("--screenshot");
      if (!v || !*v) return usage("--screenshot needs a file name");
      screenshot = v;
    } else if (a == "--map") {
      const char* v = value("--map");
      std::string err;
      if (!v || !map.add_user_rule(v, err)) return usage(v ? err : "--map needs REGEX=STAGE");
      maps = true;
    } else if (a == "--cycle") {
      const char* v = value("--cycle");
      if (!v || !parse_int(v, 1, 1000000, load_opts.cycle)) return usage("--cycle needs a cycle number (1-based)");
    } else if (a == "--steps") {
      const char* v = value("--steps");
      std::string err;
      if (!v || !ddp::parse_step_window(v, load_opts.steps, err)) return usage(v ? err : "--steps needs A-B");
    } else if (a == "--beside") {
      const char* v = value("--beside");
      if (!v || !*v) return usage("--beside needs the predicted run's folder (ddp_profile --what-if EDIT RUN -o DIR)");
      load_opts.beside = v;
    } else if (a == "--frames") {
      const char* v = value("--frames");
      if (!v || !parse_int(v, 1, 100000, frames)) return usage("--frames needs a count from 1 to 100000");
    } else if (a == "--width") {
      const char* v = value("--width");
      if (!v || !parse_int(v, 200, 16384, width)) return usage("--width needs a value from 200 to 16384");
    } else if (a == "--height") {
      const char* v = value("--height");
      if (!v || !parse_int(v, 150, 16384, height)) return usage("--height needs a value from 150 to 16384");
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option " + a);
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) return usage("no PATH given");
  if (maps && !ddp::viewer::App::opens_as_kineto_run(paths))
    return usage("--map applies to per-rank PyTorch profiler traces (several files, or a folder of them)");
  return -1;
}

// Writes the back buffer as FILE.png; false with the reason.
bool save_screenshot(const std::string& file, int fb_w, int fb_h, std::string& error) {
  std::vector<uint8_t> pixels(static_cast<size_t>(fb_w) * static_cast<size_t>(fb_h) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, fb_w, fb_h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  return ddp::viewer::write_png(file, fb_w, fb_h, pixels.data(), error);
}

void print_frame_stats(const std::vector<double>& cpu_ms, const ddp::viewer::App& app) {
  double sum = 0, mx = 0;
  for (double v : cpu_ms) {
    sum += v;
    mx = std::max(mx, v);
  }
  std::printf("frame_cpu_ms mean=%.2f p90=%.2f max=%.2f frames=%zu boxes=%llu merged=%llu\n", sum / cpu_ms.size(),
              ddp::percentile(cpu_ms, 0.9), mx, cpu_ms.size(), static_cast<unsigned long long>(app.last.boxes),
              static_cast<unsigned long long>(app.last.merged_boxes));
}

int main(int argc, char** argv) {
  ViewerArgs args;
  if (int rc = parse_args(argc, argv, args); rc >= 0) return rc;
  const std::vector<std::string>& paths = args.paths;
  const std::string& screenshot = args.screenshot;
  const ddp::KinetoStageMap& map = args.map;
  const ddp::viewer::LoadOptions& load_opts = args.load_opts;
  const int frames = args.frames, width = args.width, height = args.height;
  std::string path = paths.front();
  for (size_t i = 1; i < paths.size(); ++i) path += " " + paths[i];

  ddp::viewer::App app;
  std::string error;
  const bool headless = !screenshot.empty();

  // The traces load on a thread of their own, started before the window so that a bad input is reported as such
  // even without a display, while the window shows how far the reading is (a 2 x 2 GB pair takes seconds); the
  // readers report to trace_read_progress().
  auto t_load = std::chrono::steady_clock::now();
  // Per-rank traces are read once (the timeline is built in the analysis' reading), twice with --steps (the
  // window's files again, for only its events).
  const uint64_t readings = ddp::viewer::App::opens_as_kineto_run(paths) && !load_opts.steps.everything() ? 2 : 1;
  ddp::trace_read_progress().start(readings * ddp::trace_input_bytes(paths));
  bool loaded = false;
  std::atomic<bool> loading{true};
  std::thread loader([&] {
    loaded = app.load(paths, map, error, load_opts);
    loading = false;
  });
  auto load_failed = [&] {
    loader.join();
    if (loaded) return false;
    std::fprintf(stderr, "ddp_viewer: cannot open %s: %s\n", path.c_str(), error.c_str());
    return true;
  };

  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    if (load_failed()) return 1;
    std::fprintf(stderr, "ddp_viewer: cannot initialise GLFW (no display? for headless use run under xvfb-run)\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  if (headless) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  std::string title = "ddp_viewer - " + path;
  GLFWwindow* window = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    if (load_failed()) return 1;
    std::fprintf(stderr, "ddp_viewer: cannot create an OpenGL 3.0 window\n");
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(headless ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  while (loading) {
    glfwWaitEventsTimeout(0.1);
    if (!headless && glfwWindowShouldClose(window)) break;  // the readers cannot be interrupted: wait for them
    int fb_w = 0, fb_h = 0;
    render_frame(
        window, [&] { draw_loading(path, io.DisplaySize.x, io.DisplaySize.y); }, fb_w, fb_h);
    glfwSwapBuffers(window);
  }
  if (load_failed()) {
    shut_down(window);
    return 1;
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();
  if (headless) {
    std::printf("loaded %s: %llu spans, %zu processes in %.1f ms\n", path.c_str(),
                static_cast<unsigned long long>(app.tl.span_count), app.tl.processes.size(), load_ms);
    if (app.analysis_pending()) {  // a screenshot shows the stalls panel filled
      app.take_analysis(true);
      std::printf("analysed in %.1f ms\n",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count());
    }
  }

  std::vector<double> cpu_ms;
  int rc = 0;
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    if (headless && frame >= frames) break;
    if (headless)
      glfwPollEvents();
    else
      glfwWaitEventsTimeout(app.analysis_pending() ? 0.05 : 0.25);  // idle when nothing happens
    auto t0 = std::chrono::steady_clock::now();
    int fb_w = 0, fb_h = 0;
    render_frame(
        window, [&] { app.frame(io.DisplaySize.x, io.DisplaySize.y); }, fb_w, fb_h);
    cpu_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (headless && frame == frames - 1) {
      if (!save_screenshot(screenshot, fb_w, fb_h, error)) {
        std::fprintf(stderr, "ddp_viewer: %s\n", error.c_str());
        rc = 1;
      } else {
        std::printf("wrote %s (%dx%d)\n", screenshot.c_str(), fb_w, fb_h);
      }
    }
    glfwSwapBuffers(window);
  }
  if (headless && !cpu_ms.empty()) print_frame_stats(cpu_ms, app);
  shut_down(window);
  return rc;
}
