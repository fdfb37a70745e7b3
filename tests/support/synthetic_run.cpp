#include "tests/support/synthetic_run.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/support/test_manifest.h"
#include "traces/model/run_folder.h"
#include "traces/native/trace_writer.h"

namespace ddp::viewer {
namespace {

Event ev(Stage s, uint8_t lane, int64_t t0, int64_t t1, uint32_t step) {
  Event e = make_span(s, lane, t0, t1);
  e.step = step;
  return e;
}

}  // namespace

int64_t write_synthetic_run(const std::string& dir, const SyntheticRunOptions& o, std::string& error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  enum : uint8_t { kMain, kComm, kWorker0, kWorker1, kCopy, kGpu, kLanes };
  const char* lane_names[kLanes] = {"main", "comm", "loader 0", "loader 1", "copy", "gpu stream 7"};
  int64_t total = 0;
  for (int rank = 0; rank < o.ranks; ++rank) {
    TraceWriter w;
    if (!w.open(dir + "/" + rank_trace_file(rank), static_cast<uint32_t>(rank), static_cast<uint32_t>(o.ranks), error))
      return -1;
    for (uint8_t l = 0; l < kLanes; ++l)
      if (l != kGpu || o.kernels_per_step > 0) w.write_lane(l, lane_names[l]);
    w.write_meta("host", "synthetic" + std::to_string(rank));
    // each rank's clock runs 7 ms behind the previous one; the start measurement puts it back on rank 0's clock
    format::ClockPayload clock{};
    clock.offset_ns = 7'000'000LL * rank;
    w.write_clock(clock);
    const int64_t local = 5'000'000'000LL - clock.offset_ns;
    std::vector<std::vector<Event>> lanes(kLanes);
    uint64_t events = 0;
    auto flush = [&](bool force) {
      for (uint8_t l = 0; l < kLanes; ++l)
        if (!lanes[l].empty() && (force || lanes[l].size() >= 65536)) {
          w.write_events(l, lanes[l].data(), lanes[l].size());
          events += lanes[l].size();
          lanes[l].clear();
        }
    };
    for (int step = 0; step < o.steps; ++step) {
      const auto s = static_cast<uint32_t>(step);
      const int64_t T = local + step * o.step_ns;
      const int64_t wait = o.wait_data_ns + (rank == 1 ? o.wait_data_ns : 0);
      const int64_t f0 = T + wait, f1 = f0 + o.step_ns * 30 / 100, b1 = f1 + o.step_ns * 40 / 100;
      const int64_t wc1 = b1 + o.step_ns * 4 / 100, o1 = wc1 + o.step_ns * 6 / 100;
      auto& m = lanes[kMain];
      m.push_back(ev(Stage::wait_data, kMain, T, f0, s));
      m.push_back(ev(Stage::forward, kMain, f0, f1, s));
      m.push_back(ev(Stage::backward, kMain, f1, b1, s));
      m.push_back(ev(Stage::wait_comm, kMain, b1, wc1, s));
      m.push_back(ev(Stage::optimizer, kMain, wc1, o1, s));
      m.push_back(ev(Stage::step, kMain, T, o1, s));
      for (int b = 0; b < o.buckets; ++b) {
        int64_t a0 = f1 + (b1 - f1) * (b + 1) / (o.buckets + 1);
        Event e = ev(Stage::allreduce, kComm, a0, a0 + (b1 - f1) / (o.buckets + 1) + (wc1 - b1) / 2, s);
        e.bucket = static_cast<uint16_t>(b);
        e.value = 25u << 20;
        lanes[kComm].push_back(e);
      }
      const uint8_t worker = step % 2 ? kWorker1 : kWorker0;
      const int64_t d0 = T - o.step_ns / 2;
      lanes[worker].push_back(ev(Stage::disk_read, worker, d0, d0 + o.step_ns / 10, s + 1));
      lanes[worker].push_back(ev(Stage::transform, worker, d0 + o.step_ns / 10, d0 + o.step_ns * 7 / 20, s + 1));
      lanes[worker].push_back(ev(Stage::pin, worker, d0 + o.step_ns * 7 / 20, d0 + o.step_ns * 8 / 20, s + 1));
      Event h = ev(Stage::h2d, kCopy, f0 - o.step_ns / 50, f0, s);
      h.value = 12u << 20;
      lanes[kCopy].push_back(h);
      if (o.kernels_per_step > 0) {
        const int64_t span = b1 - f0, each = span / o.kernels_per_step;
        for (int k = 0; k < o.kernels_per_step; ++k) {
          int64_t k0 = f0 + each * k;
          lanes[kGpu].push_back(ev(k % 7 == 3 ? Stage::memcpy_h2d : Stage::kernel, kGpu, k0, k0 + each * 6 / 10, s));
        }
      }
      for (Counter c : {Counter::host_rss_bytes, Counter::cuda_allocated_bytes, Counter::loader_queue_depth}) {
        Event e;
        e.t0 = e.t1 = T;
        e.kind = static_cast<uint8_t>(EventKind::counter);
        e.stage = static_cast<uint8_t>(c);
        e.lane = kMain;
        e.value = c == Counter::loader_queue_depth ? static_cast<uint64_t>(step % 3)
                                                   : (1ull << 30) + static_cast<uint64_t>(step) * (4u << 20);
        m.push_back(e);
      }
      flush(false);
    }
    flush(true);
    w.write_end(events, 0);
    w.close();
    total += static_cast<int64_t>(events);
  }
  std::ofstream(dir + "/manifest.json") << ddp::testing::our_job_manifest_json(o.ranks).dump(2) << "\n";
  return total;
}

}  // namespace ddp::viewer
