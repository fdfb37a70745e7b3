// The Kineto reader's speed targets (issue 10), measured once each on a 2-rank set built from a real trace's event
// mix: the events of tests/data/kineto/pytorch-2.11-cpu/balanced/ replicated, each copy shifted in time and in its
// ProfilerStep numbers so steps stay distinct and ordered. Prints one line per target with its ratio (>= 1 is met):
//   parse_events_per_s    >= 10 M events/s, one core, the JSON already in memory
//   gunzip_out_bytes_per_s >= 1 GB/s of inflated output
//   open_align_analyse_s  <= 2 s for both ranks (load_kineto_run + analyze, as ddp_profile --analyze does)
//   viewer_bytes_per_span <= 40 (the Timeline of one rank's trace: heap in use after building it, per span)
//   viewer_peak_rss      <= 1.0 GB on 2 x 10 M events (issue 51), printed as measured/target
// Usage: kineto_bench [events per rank, default 5000000]
//   KINETO_BENCH_DIR=D    generate the set into D and keep it; a D that already holds it is read as it is (the
//                         2 x 50 M set takes minutes to write and 2 x 10 GB of disk)
//   KINETO_BENCH_ONLY=viewer  only the viewer against --analyze (the set's generation aside)
//   KINETO_BENCH_ONLY=viewer-load or analyze-load  one load in this process, for a profiler
//   KINETO_BENCH_ROUNDS=N     N alternating pairs of --analyze and the viewer, the ratio of their means (default 1)
#include <libdeflate.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "traces/analysis/analysis.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_import.h"
#include "traces/timeline/timeline.h"
#include "traces/timeline/timeline_kineto.h"
#ifdef DDP_HAVE_VIEWER
#include "viewer/app.h"
#endif

namespace fs = std::filesystem;
using namespace ddp;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kineto_bench: %s\n", what.c_str());
  std::exit(1);
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_value(std::string& out, const ChromeValue& v) {
  if (v.type == ChromeValue::string)
    append_json_string(out, v.text);
  else
    out += v.text;  // numbers, literals and raw arrays/objects as written
}

// One event of the real trace, written out as Kineto writes it except for its time and step number, which change
// per copy.
struct TemplateEvent {
  std::string before_ts;  // "{\"ph\": ..., \"name\": \"ProfilerStep#\"" up to the step number or the timestamp
  bool profiler_step = false;
  uint32_t step = 0;
  std::string after_name;  // the rest of the head up to "ts"
  int64_t ts_ns = 0;
  bool has_dur = false;
  int64_t dur_ns = 0;
  std::string tail;  // args and the closing brace
};

struct RankTemplate {
  std::string head;  // the top-level members before "traceEvents"
  std::vector<TemplateEvent> events;
  int64_t t_min = 0, t_max = 0;
  uint32_t max_step = 0;
};

void append_micros(std::string& out, int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  out += buf;
}

RankTemplate read_template(const std::string& path) {
  std::string text;
  ChromeStatus s = read_chrome_bytes(path, text);
  if (!s.ok()) die(s.message);
  RankTemplate t;
  t.t_min = INT64_MAX;
  t.t_max = INT64_MIN;
  ChromeDocInfo info;
  s = parse_chrome_json(
      text,
      [&](const ChromeEventView& e) {
        TemplateEvent ev;
        std::string& h = ev.before_ts;
        h = "  {\n    \"ph\": \"";
        h += e.ph;
        h += "\", \"cat\": ";
        append_json_string(h, e.cat);
        h += ", \"name\": ";
        constexpr std::string_view kStep = "ProfilerStep#";
        if (e.name.substr(0, kStep.size()) == kStep) {
          ev.profiler_step = true;
          ev.step = static_cast<uint32_t>(std::strtoul(std::string(e.name.substr(kStep.size())).c_str(), nullptr, 10));
          h += "\"ProfilerStep#";
          t.max_step = std::max(t.max_step, ev.step);
        } else {
          append_json_string(h, e.name);
        }
        std::string& m = ev.after_name;
        m = ev.profiler_step ? "\"" : "";
        m += ", \"pid\": ";
        append_value(m, e.pid);
        m += ", \"tid\": ";
        append_value(m, e.tid);
        m += ",\n    \"ts\": ";
        ev.ts_ns = e.ts_ns;
        ev.has_dur = e.has_dur;
        ev.dur_ns = e.dur_ns;
        if (e.has_ts) {
          t.t_min = std::min(t.t_min, e.ts_ns);
          t.t_max = std::max(t.t_max, e.ts_ns + (e.has_dur ? e.dur_ns : 0));
        }
        std::string& a = ev.tail;
        if (e.arg_count > 0) {
          a += ",\n    \"args\": {\n      ";
          for (size_t i = 0; i < e.arg_count; ++i) {
            if (i) a += ", ";
            append_json_string(a, e.args[i].key);
            a += ": ";
            append_value(a, e.args[i].value);
          }
          a += "\n    }";
        }
        a += "\n  }";
        t.events.push_back(std::move(ev));
        return true;
      },
      info);
  if (!s.ok()) die(path + ": " + s.message);
  for (auto it = info.top.begin(); it != info.top.end(); ++it)
    t.head += "  \"" + it.key() + "\": " + it->dump() + ",\n";
  return t;
}

// Writes `events` events: copies of the template, each shifted past the one before it.
void write_rank(const RankTemplate& t, size_t events, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  std::string buf = "{\n" + t.head + "  \"traceEvents\": [\n";
  const int64_t period = t.t_max - t.t_min + 1'000'000;  // 1 ms between copies
  size_t written = 0;
  for (uint32_t copy = 0; written < events; ++copy) {
    const int64_t shift = copy * period;
    const uint32_t step_shift = copy * (t.max_step + 1);
    for (const TemplateEvent& e : t.events) {
      if (written == events) break;
      if (written) buf += ",\n";
      buf += e.before_ts;
      if (e.profiler_step) buf += std::to_string(e.step + step_shift);
      buf += e.after_name;
      append_micros(buf, e.ts_ns + shift);
      if (e.has_dur) {
        buf += ", \"dur\": ";
        append_micros(buf, e.dur_ns);
      }
      buf += e.tail;
      ++written;
      if (buf.size() > (8u << 20)) {
        out << buf;
        buf.clear();
      }
    }
  }
  buf += "\n  ]\n}\n";
  out << buf;
  if (!out) die("cannot write " + path);
}

void report(const char* metric, double value, const char* unit, double target, bool at_least, const std::string& how) {
  const double ratio = at_least ? value / target : target / value;
  std::printf("%s=%.3g%s target=%s%.3g%s ratio=%.2f (%s)\n", metric, value, unit, at_least ? ">=" : "<=", target, unit,
              ratio, how.c_str());
  std::fflush(stdout);
}

void measure_parse(const std::string& path) {
  std::string text;
  ChromeStatus s = read_chrome_bytes(path, text);
  if (!s.ok()) die(s.message);
  uint64_t spans = 0;
  ChromeDocInfo info;
  auto t0 = std::chrono::steady_clock::now();
  s = parse_chrome_json(
      text,
      [&](const ChromeEventView& e) {
        spans += e.ph == 'X';
        return true;
      },
      info);
  const double sec = seconds_since(t0);
  if (!s.ok()) die(s.message);
  report("parse_events_per_s", static_cast<double>(info.events) / sec / 1e6, "M", 10, true,
         std::to_string(info.events) + " events, " + std::to_string(text.size() >> 20) + " MiB in " +
             std::to_string(sec) + " s, one thread");
  // A string_view has no room for simdjson's padding: a text read whole would be copied first; one read in pieces
  // (copied anyway) costs the same as the string.
  ChromeDocInfo info2;
  t0 = std::chrono::steady_clock::now();
  s = parse_chrome_json(std::string_view(text), nullptr, info2);
  const double copied = seconds_since(t0);
  std::printf("parse_string_view_s=%.3f (std::string: %.3f s)\n", copied, sec);
}

void measure_gunzip(const std::string& path) {
  std::string text;
  ChromeStatus s = read_chrome_bytes(path, text);
  if (!s.ok()) die(s.message);
  text.resize(std::min<size_t>(text.size(), 256u << 20));     // compressing more would only make the bench slower
  libdeflate_compressor* c = libdeflate_alloc_compressor(6);  // gzip's default level
  std::string gz(libdeflate_gzip_compress_bound(c, text.size()), '\0');
  gz.resize(libdeflate_gzip_compress(c, text.data(), text.size(), gz.data(), gz.size()));
  libdeflate_free_compressor(c);
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  s = gunzip(gz, out);
  const double sec = seconds_since(t0);
  if (!s.ok() || out != text) die("gunzip failed: " + s.message);
  report("gunzip_out_bytes_per_s", static_cast<double>(out.size()) / sec / 1e9, "G", 1, true,
         std::to_string(gz.size() >> 20) + " MiB gzip -> " + std::to_string(out.size() >> 20) + " MiB in " +
             std::to_string(sec) + " s");
}

void measure_open_align_analyse(const std::string& dir, size_t events) {
  auto t0 = std::chrono::steady_clock::now();
  RunTrace run;
  std::string err;
  if (!load_kineto_run({dir}, KinetoStageMap{}, run, err)) die(err);
  const double loaded = seconds_since(t0);
  Analysis a = analyze(run);
  const double sec = seconds_since(t0);
  size_t kept = 0;
  for (const RankTrace& r : run.ranks) kept += r.events.size();
  report("open_align_analyse_s", sec, "s", 2, false,
         std::to_string(run.ranks.size()) + " ranks x " + std::to_string(events) + " events, " + std::to_string(kept) +
             " stage spans kept; load+align " + std::to_string(loaded) + " s, verdict: " + a.verdict.substr(0, 60));
}

size_t heap_in_use() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void measure_viewer_memory(const std::string& path) {
  const size_t before = heap_in_use();
  Timeline tl;
  std::string err;
  auto t0 = std::chrono::steady_clock::now();
  if (!timeline_from_chrome_file(path, tl, err)) die(err);
  const double sec = seconds_since(t0);
  malloc_trim(0);
  const size_t after = heap_in_use();
  const double per_span = static_cast<double>(after - before) / static_cast<double>(tl.span_count);
  report("viewer_bytes_per_span", per_span, "", 40, false,
         std::to_string(tl.span_count) + " spans, " + std::to_string((after - before) >> 20) +
             " MiB heap after building the timeline (sizeof(Span) = " + std::to_string(sizeof(Span)) + "), built in " +
             std::to_string(sec) + " s");
}

// Runs `work` in a child process: its wall time and peak RSS, each command measured alone (as a user runs it).
struct ChildCost {
  double seconds = 0;  // until the child exited
  double ready_s = 0;  // until the child said it was ready (ChildResult::ready), else its exit
  double peak_rss_bytes = 0;
  uint64_t count = 0;  // what the child counted (spans), passed back through its exit pipe
};
// What a child passes back: its count, and when what it measures was ready (the steady clock is the system's
// monotonic one, the same in parent and child), where that is before it exits.
struct ChildResult {
  uint64_t count = 0;
  std::chrono::steady_clock::time_point ready{};
};
template <class F>
ChildCost in_child(F work) {
  int fds[2];
  if (::pipe(fds) != 0) die("pipe failed");
  std::fflush(stdout);  // else the child prints the parent's buffered lines again
  auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ChildResult r = work();
    if (r.ready == std::chrono::steady_clock::time_point{}) r.ready = std::chrono::steady_clock::now();
    if (::write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) ::_exit(1);
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildCost c;
  ChildResult r;
  if (::read(fds[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) die("the child failed");
  ::close(fds[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  c.seconds = seconds_since(t0);
  c.count = r.count;
  c.ready_s = std::min(c.seconds, std::chrono::duration<double>(r.ready - t0).count());
  c.peak_rss_bytes = static_cast<double>(ru.ru_maxrss) * 1024.0;
  return c;
}

// The viewer's load: read and align (every event into the timeline in the same reading), analyse (the stalls panel),
// then the timeline on the measured clock. `read_again`: the timeline from a second reading of every file instead (as
// the viewer did before, and still does for a --steps window).
// This process's resident and peak resident memory now (GB), from /proc/self/status.
std::string rss_now() {
  std::ifstream in("/proc/self/status");
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0 || line.rfind("VmHWM:", 0) == 0) {
      const double kb = std::strtod(line.c_str() + 6, nullptr);
      char buf[48];
      std::snprintf(buf, sizeof(buf), "%s %.3f GB ", line.substr(0, 5).c_str(), kb / 1e6);
      out += buf;
    }
  return out;
}

// The viewer's load of the traces in `dir`, its own (viewer/app.cpp): `ready` when load returns (the viewer shows the
// timeline then), the analysis (the stalls panel) waited for after. Built without the viewer: its steps done here.
ChildResult viewer_app_load(const std::string& dir);

// The viewer's load step by step, each step timed (for a profiler, and reading every file again): read and align
// (every event into the timeline in the same reading, or not with `read_again`), then the analysis beside the
// timeline.
ChildResult viewer_load(const std::string& dir, bool read_again) {
  auto t0 = std::chrono::steady_clock::now();
  KinetoTimelineParts parts;
  const KinetoFileEvents each_file = parts.reader();
  RunTrace run;
  std::string err;
  if (!load_kineto_run({dir}, KinetoStageMap{}, run, err, 0, read_again ? nullptr : &each_file)) die(err);
  const double read = seconds_since(t0);
  const std::string rss_read = rss_now();
  std::future<double> analysed = std::async(std::launch::async, [&run, t0] {
    Analysis a = analyze(run);
    return seconds_since(t0);
  });
  Timeline tl;
  if (!timeline_from_kineto_run(run, parts, tl, err)) die(err);
  ChildResult r{tl.span_count, std::chrono::steady_clock::now()};
  const double built = seconds_since(t0);
  const double analysed_at = analysed.get();
  std::printf("  viewer%s: read and align %.3f s (%s), then side by side: analyse %.3f s, timeline %.3f s (%s)\n",
              read_again ? " (reading again)" : "", read, rss_read.c_str(), analysed_at - read, built - read,
              rss_now().c_str());
  std::fflush(stdout);
  return r;
}

#ifdef DDP_HAVE_VIEWER
ChildResult viewer_app_load(const std::string& dir) {
  viewer::App app;
  std::string err;
  if (!app.load({dir}, KinetoStageMap{}, err)) die(err);
  ChildResult r{app.tl.span_count, std::chrono::steady_clock::now()};
  app.take_analysis(true);
  if (app.stall_source.empty()) die("the viewer's analysis did not arrive");
  return r;
}
#else
ChildResult viewer_app_load(const std::string& dir) { return viewer_load(dir, false); }
#endif

// The viewer opening per-rank traces (what ddp_viewer TRACES does) against --analyze of the same files, each in a
// process of its own.
// Reads every file once, untimed, so that the first command measured does not pay for the disk alone (a set bigger
// than the page cache is read from disk by every command: then the figures say so).
void warm_page_cache(const std::vector<std::string>& files) {
  std::vector<char> buf(8u << 20);
  uint64_t bytes = 0;
  for (const std::string& f : files) {
    std::FILE* in = std::fopen(f.c_str(), "rb");
    if (!in) die("cannot read " + f);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), in)) > 0) bytes += n;
    std::fclose(in);
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const double ram = static_cast<double>(pages) * static_cast<double>(page);
  if (static_cast<double>(bytes) > 0.6 * ram)
    std::printf(
        "note: the set (%.1f GB) is more than the page cache can hold of %.1f GB of memory: every command reads "
        "it from disk\n",
        static_cast<double>(bytes) / 1e9, ram / 1e9);
}

// `rounds` alternating pairs of --analyze and the viewer (KINETO_BENCH_ROUNDS, default 1): one run of each varies by
// +-5 % on a shared VM, the ratio of the means over several pairs less.
void measure_viewer_against_analyze(const std::string& dir, const std::vector<std::string>& files, int rounds) {
  warm_page_cache(files);
  double analyze_s = 0, viewer_s = 0, viewer_whole_s = 0, analyze_rss = 0, viewer_rss = 0;
  uint64_t spans = 0;
  for (int r = 0; r < rounds; ++r) {
    const ChildCost analyze_cost = in_child([&] {
      RunTrace run;
      std::string err;
      if (!load_kineto_run({dir}, KinetoStageMap{}, run, err)) die(err);
      Analysis a = analyze(run);
      return ChildResult{a.ranks.size()};  // the command's whole time, to its exit
    });
    const ChildCost viewer_cost = in_child([&] { return viewer_app_load(dir); });
    std::printf("  round %d: viewer %.3f s (the stalls panel %.3f s), --analyze %.3f s = %.3fx (%.3fx)\n", r + 1,
                viewer_cost.ready_s, viewer_cost.seconds, analyze_cost.seconds,
                viewer_cost.ready_s / analyze_cost.seconds, viewer_cost.seconds / analyze_cost.seconds);
    analyze_s += analyze_cost.seconds;
    viewer_s += viewer_cost.ready_s;
    viewer_whole_s += viewer_cost.seconds;
    analyze_rss = std::max(analyze_rss, analyze_cost.peak_rss_bytes);
    viewer_rss = std::max(viewer_rss, viewer_cost.peak_rss_bytes);
    spans = viewer_cost.count;
  }
  const ChildCost twice_cost = in_child([&] { return viewer_load(dir, true); });
  report("viewer_open_vs_analyze", viewer_s / analyze_s, "x", 1.2, false,
         "means of " + std::to_string(rounds) + " rounds: viewer " + std::to_string(viewer_s / rounds) +
             " s (its stalls panel " + std::to_string(viewer_whole_s / rounds) + " s = " +
             std::to_string(viewer_whole_s / analyze_s) + "x), --analyze " + std::to_string(analyze_s / rounds) +
             " s; reading every file again for the timeline: " + std::to_string(twice_cost.ready_s) +
             " s = " + std::to_string(twice_cost.ready_s / (analyze_s / rounds)) + "x");
  // Issue 51: the viewer opens 2 x 10 M events in at most 1.0 GB (it did at 1a9e738, before the what-if replay).
  constexpr double kViewerPeakRssTarget = 1e9;
  std::printf(
      "viewer_peak_rss=%.3fGB target<=%.1fGB on 2 x 10 M events measured/target=%.2f (<= 1: met; %s spans, "
      "--analyze %.3f GB)\n",
      viewer_rss / 1e9, kViewerPeakRssTarget / 1e9, viewer_rss / kViewerPeakRssTarget, std::to_string(spans).c_str(),
      analyze_rss / 1e9);
  const double per_span = viewer_rss / static_cast<double>(spans);
  report("viewer_peak_rss_per_span", per_span, "B", 40, false,
         std::to_string(spans) + " spans, peak RSS " + std::to_string(viewer_rss / 1e9) +
             " GB: 100 M spans would need " + std::to_string(per_span * 1e8 / 1e9) + " GB (target 4 GB); --analyze " +
             std::to_string(analyze_rss / 1e9) + " GB");
}

}  // namespace

int main(int argc, char** argv) {
  const size_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 5'000'000;
  const std::string src = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-2.11-cpu/balanced/";
  const char* keep_dir = std::getenv("KINETO_BENCH_DIR");
  const fs::path dir =
      keep_dir ? fs::path(keep_dir) : fs::temp_directory_path() / ("kineto_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> fixtures;
  for (const auto& e : fs::directory_iterator(src)) fixtures.push_back(e.path().string());
  std::sort(fixtures.begin(), fixtures.end());
  if (fixtures.size() != 2) die(src + ": expected two rank traces");
  std::vector<std::string> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back((dir / ("rank" + std::to_string(r) + ".pt.trace.json")).string());
    const fs::path done = ranks.back() + "." + std::to_string(events) + ".written";  // a set written whole before
    if (keep_dir && fs::exists(done)) {
      std::printf("reusing %s (%llu MiB)\n", ranks.back().c_str(),
                  static_cast<unsigned long long>(fs::file_size(ranks.back()) >> 20));
      continue;
    }
    RankTemplate t = read_template(fixtures[r]);
    write_rank(t, events, ranks.back());
    std::ofstream(done.string()) << events << "\n";
    std::printf("generated %s: %zu events (%zu-event real trace x %zu), %llu MiB\n", ranks.back().c_str(), events,
                t.events.size(), (events + t.events.size() - 1) / t.events.size(),
                static_cast<unsigned long long>(fs::file_size(ranks.back()) >> 20));
  }
  std::printf("generated in %.1f s\n", seconds_since(t0));
  const char* only = std::getenv("KINETO_BENCH_ONLY");
  // For a profiler (perf record): one load in this process, no child.
  if (only && std::string_view(only) == "viewer-load") return viewer_load(dir.string(), false).count > 0 ? 0 : 1;
  if (only && std::string_view(only) == "analyze-load") {
    RunTrace run;
    std::string err;
    if (!load_kineto_run({dir.string()}, KinetoStageMap{}, run, err)) die(err);
    return analyze(run).ranks.empty() ? 1 : 0;
  }
  if (!only || std::string_view(only) != "viewer") {
    measure_parse(ranks[0]);
    measure_gunzip(ranks[0]);
    measure_open_align_analyse(dir.string(), events);
    measure_viewer_memory(ranks[0]);
  }
  const char* rounds = std::getenv("KINETO_BENCH_ROUNDS");
  measure_viewer_against_analyze(dir.string(), ranks, rounds ? std::max(1, std::atoi(rounds)) : 1);
  if (!keep_dir) fs::remove_all(dir);
  return 0;
}
