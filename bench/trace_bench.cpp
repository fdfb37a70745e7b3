// Trace size in bytes per event (target <= 16) and Chrome export speed in events per second (target >= 5 M/s),
// on a synthetic run shaped like a real one (a main lane with the step's stages back to back, loader lanes, a comm
// lane, a memory counter). Prints one line per metric with its ratio to the target.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"

namespace fs = std::filesystem;
using namespace ddp;

static size_t write_rank(const std::string& path, uint32_t rank, size_t steps) {
  TraceWriter w;
  std::string err;
  if (!w.open(path, rank, 2, err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    std::exit(1);
  }
  const char* lanes[] = {"main", "memory", "comm", "loader/0", "loader/1"};
  for (uint8_t l = 0; l < 5; ++l) w.write_lane(l, lanes[l]);
  std::mt19937_64 rng(rank);
  auto jitter = [&](int64_t base) { return base + static_cast<int64_t>(rng() % (base / 4 + 1)); };
  std::vector<Event> lane_buf[5];
  size_t total = 0;
  int64_t t = 1'000'000'000;
  auto flush = [&](bool force) {
    for (uint8_t l = 0; l < 5; ++l)
      if (lane_buf[l].size() >= 4096 || (force && !lane_buf[l].empty())) {
        w.write_events(l, lane_buf[l].data(), lane_buf[l].size());
        total += lane_buf[l].size();
        lane_buf[l].clear();
      }
  };
  for (size_t s = 0; s < steps; ++s) {
    auto span = [&](uint8_t lane, Stage st, int64_t t0, int64_t dur, uint64_t value, uint16_t bucket = kNoBucket) {
      Event e;
      e.t0 = t0;
      e.t1 = t0 + dur;
      e.stage = static_cast<uint8_t>(st);
      e.step = static_cast<uint32_t>(s);
      e.epoch = static_cast<uint16_t>(s / 78);
      e.item = static_cast<uint32_t>(s % 78);
      e.value = value;
      e.bucket = bucket;
      e.lane = lane;
      lane_buf[lane].push_back(e);
      return t0 + dur;
    };
    int64_t step0 = t;
    uint8_t loader = static_cast<uint8_t>(3 + s % 2);
    int64_t l = span(loader, Stage::disk_read, t - 2'000'000, jitter(70'000), 33'024);
    l = span(loader, Stage::transform, l, jitter(9'000), 0);
    span(loader, Stage::pin, l, jitter(2'000), 33'280);
    t = span(0, Stage::wait_data, t, jitter(15'000), 0);
    t = span(0, Stage::h2d, t, jitter(20'000), 33'280);
    t = span(0, Stage::forward, t, jitter(600'000), 0);
    int64_t bwd0 = t;
    t = span(0, Stage::backward, t, jitter(1'000'000), 0);
    span(2, Stage::allreduce, bwd0 + 800'000, jitter(1'500'000), 268'296, 0);
    t = span(0, Stage::wait_comm, t, jitter(1'300'000), 0);
    t = span(0, Stage::optimizer, t, jitter(300'000), 0);
    span(0, Stage::step, step0, t - step0, 0);
    if (s % 10 == 0) {
      Event c;
      c.kind = static_cast<uint8_t>(EventKind::counter);
      c.stage = static_cast<uint8_t>(Counter::host_rss_bytes);
      c.t0 = c.t1 = t;
      c.value = 180'000'000 + rng() % 1'000'000;
      c.lane = 1;
      lane_buf[1].push_back(c);
    }
    flush(false);
  }
  flush(true);
  w.write_end(total, 0);
  return total;
}

int main(int argc, char** argv) {
  size_t steps = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  fs::path dir = fs::temp_directory_path() / ("trace_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  size_t events = 0;
  for (uint32_t r = 0; r < 2; ++r)
    events += write_rank((dir / rank_trace_file(static_cast<int>(r))).string(), r, steps);
  uint64_t bytes = fs::file_size(dir / "rank0.ddpt") + fs::file_size(dir / "rank1.ddpt");
  double per_event = static_cast<double>(bytes) / static_cast<double>(events);
  std::printf("trace_bytes_per_event=%.2f target=16 ratio=%.3f (%zu events, %llu bytes)\n", per_event, per_event / 16.0,
              events, static_cast<unsigned long long>(bytes));

  auto t0 = std::chrono::steady_clock::now();
  RunTrace run;
  std::string err;
  if (!load_run(dir.string(), run, err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  ExportStats stats;
  const char* sink = std::getenv("TRACE_BENCH_SINK");
  if (!export_chrome(run, sink ? std::string(sink) : (dir / "trace.json").string(), stats, err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  auto t2 = std::chrono::steady_clock::now();
  double read_s = std::chrono::duration<double>(t1 - t0).count();
  double export_s = std::chrono::duration<double>(t2 - t1).count();
  double rate = static_cast<double>(stats.events) / export_s;
  std::printf("native_read_events_per_s=%.2fM\n", static_cast<double>(events) / read_s / 1e6);
  std::printf("export_events_per_s=%.2fM target=5M ratio=%.3f (%.1f MB JSON in %.3f s)\n", rate / 1e6, rate / 5e6,
              static_cast<double>(stats.bytes) / 1e6, export_s);
  fs::remove_all(dir);
  return 0;
}
