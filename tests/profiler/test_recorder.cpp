#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "profiler/clock.h"
#include "profiler/clock_sync.h"
#include "profiler/span.h"
#include "traces/native/trace_reader.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

std::string temp_file(const char* name) {
  auto d = fs::temp_directory_path() / ("ddp_prof_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

TEST(Recorder, SpansFromSeveralThreadsLandOnTheirLanes) {
  prof::RecorderConfig cfg;
  cfg.path = temp_file("threads.ddpt");
  cfg.rank = 1;
  cfg.world = 2;
  cfg.flush_ms = 5;
  std::string err;
  ASSERT_TRUE(prof::start(cfg, err)) << err;
  const int per_thread = 20000;
  auto work = [&](int id) {
    prof::name_this_thread("worker/" + std::to_string(id));
    prof::set_context({/*step=*/100 + static_cast<uint32_t>(id), /*epoch=*/1, /*micro=*/0});
    for (int i = 0; i < per_thread; ++i) {
      prof::Span s(id == 0 ? Stage::forward : Stage::transform);
      s.bytes(static_cast<uint64_t>(i));
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  int64_t before = prof::monotonic_ns();
  prof::RecorderStats st = prof::stop();
  auto r = read_trace_file(cfg.path);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(r.trace.complete);
  EXPECT_EQ(r.trace.rank, 1u);
  size_t fwd = 0, tr = 0;
  for (const auto& e : r.trace.events) {
    if (!e.is_span()) continue;
    const std::string& lane = r.trace.lane_name(e.lane);
    if (e.stage_id() == Stage::forward) {
      ++fwd;
      EXPECT_EQ(lane, "worker/0");
      EXPECT_EQ(e.step, 100u);
    } else if (e.stage_id() == Stage::transform) {
      ++tr;
      EXPECT_EQ(lane, "worker/1");
    }
    EXPECT_LE(e.t0, e.t1);
    EXPECT_LE(e.t1, before) << "ticks converted onto CLOCK_MONOTONIC";
    EXPECT_GT(e.t0, before - 60'000'000'000) << "ticks converted onto CLOCK_MONOTONIC";
  }
  EXPECT_EQ(fwd + tr + st.dropped, 2u * per_thread);
  // Records written: every span kept with its CPU split, one cpu record each (folded into trace.cpu when read).
  EXPECT_EQ(r.trace.cpu.size(), fwd + tr);
  EXPECT_EQ(st.events, r.trace.events.size() + r.trace.cpu.size());
}

TEST(Recorder, FullRingDropsAndCountsInsteadOfBlocking) {
  prof::RecorderConfig cfg;
  cfg.path = temp_file("drops.ddpt");
  cfg.ring_events = 64;
  cfg.flush_ms = 1000;  // the drainer will not keep up
  std::string err;
  ASSERT_TRUE(prof::start(cfg, err)) << err;
  for (int i = 0; i < 1000; ++i) prof::Span s(Stage::pin);
  prof::RecorderStats st = prof::stop();
  EXPECT_GT(st.dropped, 0u);
  auto r = read_trace_file(cfg.path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.trace.dropped, st.dropped);
  EXPECT_EQ(r.trace.events.size() + st.dropped, 1000u);  // a span and its split are dropped together
  EXPECT_EQ(r.trace.cpu.size(), r.trace.events.size());
}

TEST(Recorder, WithRecordingOffNothingIsAllocatedOrRecorded) {
  EXPECT_FALSE(prof::recording());
  // A thread that spans, sets its context and counts while nothing records gets no buffer: the off path allocates
  // nothing and has nowhere to write.
  std::thread([] {
    for (int i = 0; i < 10; ++i) prof::Span s(Stage::forward);
    prof::set_context({/*step=*/1, /*epoch=*/0, /*micro=*/0});
    prof::record_counter(Counter::host_rss_bytes, 1);
    prof::name_this_thread("idle");
    EXPECT_EQ(prof::t_buffer, nullptr);
  }).join();
  for (int i = 0; i < 10; ++i) prof::Span s(Stage::forward);  // on this thread too: none of these reach a recording
  prof::RecorderConfig cfg;
  cfg.path = temp_file("off_then_on.ddpt");
  cfg.sample_host_memory = false;
  std::string err;
  ASSERT_TRUE(prof::start(cfg, err)) << err;
  { prof::Span s(Stage::backward); }
  prof::stop();
  auto r = read_trace_file(cfg.path);
  ASSERT_TRUE(r.ok()) << r.message;
  size_t spans = 0;
  for (const auto& e : r.trace.events) spans += e.is_span();
  EXPECT_EQ(spans, 1u) << "only the span made while recording";

  cfg.path = "/nonexistent-dir/x.ddpt";  // a recording that cannot start leaves recording off
  EXPECT_FALSE(prof::start(cfg, err));
  EXPECT_FALSE(err.empty());
  EXPECT_FALSE(prof::recording());
}

TEST(Recorder, FlushMakesEventsDurableBeforeStop) {
  prof::RecorderConfig cfg;
  cfg.path = temp_file("flush.ddpt");
  cfg.flush_ms = 100000;
  std::string err;
  ASSERT_TRUE(prof::start(cfg, err));
  for (int i = 0; i < 10; ++i) prof::Span s(Stage::backward);
  prof::flush();
  auto r = read_trace_file(cfg.path);  // as a killed process would leave it
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.trace.complete);
  size_t n = 0;
  for (auto& e : r.trace.events) n += e.is_span();
  EXPECT_EQ(n, 10u);
  prof::stop();
}

TEST(Recorder, AThreadRecordsAgainInALaterRecording) {
  // stop() frees every thread's buffer; a thread that recorded before must notice without reading the freed buffer
  // (under ASan a use-after-free shows here).
  prof::RecorderConfig cfg;
  cfg.path = temp_file("again.ddpt");
  std::string err;
  for (int recording = 0; recording < 2; ++recording) {
    ASSERT_TRUE(prof::start(cfg, err)) << err;
    { prof::Span s(Stage::optimizer); }
    prof::stop();
  }
  auto r = read_trace_file(cfg.path);
  ASSERT_TRUE(r.ok()) << r.message;
  size_t spans = 0;
  for (const auto& e : r.trace.events) spans += e.is_span();
  EXPECT_EQ(spans, 1u);
}

TEST(Recorder, FlushFromAnotherThreadIsSafeWhileRecordingStartsAndStops) {
  // The SIGTERM thread calls flush() whenever the signal comes, also while the main thread is inside stop(): flush
  // must never reach a recorder that stop() is destroying (under ASan a use-after-free shows here at once).
  std::atomic<bool> done{false};
  std::atomic<uint64_t> flushes{0};
  std::thread flusher([&] {
    while (!done.load()) {
      prof::flush();
      flushes.fetch_add(1);
    }
  });
  prof::RecorderConfig cfg;
  cfg.path = temp_file("flush_race.ddpt");
  cfg.flush_ms = 1;
  cfg.ring_events = 64;
  const int cycles = 200;
  for (int i = 0; i < cycles; ++i) {
    std::string err;
    ASSERT_TRUE(prof::start(cfg, err)) << err;
    for (int k = 0; k < 20; ++k) prof::Span s(Stage::forward);
    prof::stop();
  }
  done.store(true);
  flusher.join();
  EXPECT_GT(flushes.load(), 0u);
  auto r = read_trace_file(cfg.path);  // the last cycle's trace is whole
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(r.trace.complete);
}

TEST(Clock, TicksConvertCloseToMonotonic) {
  prof::TickConverter c;
  c.add(prof::sample_clock_pair());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.add(prof::sample_clock_pair());
  for (int i = 0; i < 5; ++i) {
    int64_t a = prof::monotonic_ns();
    uint64_t t = prof::ticks();
    int64_t b = prof::monotonic_ns();
    int64_t ns = c.to_ns(t);
    EXPECT_GE(ns, a - 50'000);  // within 50 us of the bracketing readings
    EXPECT_LE(ns, b + 50'000);
  }
}

TEST(ClockSync, MinimumRoundTripWins) {
  // Peer clock = local + 1000 ns. Round trips of 400, 100 (symmetric) and 5000 (asymmetric delay) ns.
  std::vector<prof::PingRound> r = {{0, 1000 + 200, 400}, {10000, 11000 + 50, 10100}, {20000, 21000 + 4900, 25000}};
  auto o = prof::estimate_offset(r);
  ASSERT_TRUE(o.valid);
  EXPECT_EQ(o.peer_minus_local_ns, 1000);
  EXPECT_EQ(o.uncertainty_ns, 50);
  EXPECT_EQ(o.rounds, 3u);
  EXPECT_FALSE(prof::estimate_offset({}).valid);
  EXPECT_FALSE(prof::estimate_offset({{100, 5, 50}}).valid) << "a negative round trip is discarded";
}
}  // namespace
