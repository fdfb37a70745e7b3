// CUDA activity without a GPU: a fake source drives record -> event conversion, clock mapping and correlation
// linking; the CUPTI source (when built) must refuse to start cleanly on a machine without a driver or device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "profiler/clock.h"
#include "profiler/gpu_activity.h"
#include "profiler/span.h"
#include "tests/support/fake_activity_source.h"
#include "tests/support/memory_event_sink.h"
#include "traces/native/trace_reader.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;
using prof::ActivityKind;
using prof::ActivityRecord;
using prof::MemKind;

std::string temp_file(const char* name) {
  auto d = fs::temp_directory_path() / ("ddp_gpu_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

using MemorySink = ddp::testing::MemoryEventSink;

ActivityRecord api(uint32_t corr, uint32_t thread, uint64_t t0, uint64_t t1, const char* name = "cudaLaunchKernel") {
  ActivityRecord r;
  r.kind = ActivityKind::runtime_api;
  r.correlation = corr;
  r.thread = thread;
  r.start = t0;
  r.end = t1;
  r.name = name;
  return r;
}

ActivityRecord kernel(uint32_t corr, uint64_t t0, uint64_t t1, const char* name = "elementwise_kernel",
                      uint32_t device = 0, uint32_t stream = 7) {
  ActivityRecord r;
  r.kind = ActivityKind::kernel;
  r.correlation = corr;
  r.device = device;
  r.stream = stream;
  r.start = t0;
  r.end = t1;
  r.name = name;
  return r;
}

ActivityRecord copy(uint32_t corr, MemKind src, MemKind dst, uint64_t bytes, uint64_t t0, uint64_t t1) {
  ActivityRecord r;
  r.kind = ActivityKind::memcpy;
  r.correlation = corr;
  r.src = src;
  r.dst = dst;
  r.bytes = bytes;
  r.stream = 13;
  r.start = t0;
  r.end = t1;
  return r;
}

// ---- clock mapping ---------------------------------------------------------------------------------------------

TEST(ClockMap, IdentityUntilCalibrated) {
  prof::ClockMap m;
  EXPECT_TRUE(m.identity());
  EXPECT_EQ(m.to_monotonic(12345), 12345);
}

TEST(ClockMap, OnePairIsAnOffset) {
  prof::ClockMap m;
  m.add(1'000'000'000'000, 5'000);  // CUPTI's CLOCK_REALTIME vs CLOCK_MONOTONIC: a large constant offset
  EXPECT_EQ(m.to_monotonic(1'000'000'000'000), 5'000);
  EXPECT_EQ(m.to_monotonic(1'000'000'001'000), 6'000);
  EXPECT_EQ(m.to_monotonic(999'999'999'000), 4'000);
}

TEST(ClockMap, InterpolatesDriftBetweenPairsAndExtendsBeyond) {
  prof::ClockMap m;
  // The source runs 100 ppm fast: 1'000'100 source ns per 1'000'000 monotonic ns.
  m.add(10'000'000, 0);
  m.add(11'000'100, 1'000'000);
  m.add(12'000'200, 2'000'000);
  EXPECT_EQ(m.to_monotonic(10'500'050), 500'000);
  EXPECT_NEAR(static_cast<double>(m.to_monotonic(11'500'150)), 1'500'000.0, 1.0);
  EXPECT_NEAR(static_cast<double>(m.to_monotonic(13'000'300)), 3'000'000.0, 1.0);  // after the last pair
  EXPECT_NEAR(static_cast<double>(m.to_monotonic(9'000'000)), -999'900.0, 1.0);    // before the first
  EXPECT_EQ(m.pairs(), 3u);
}

TEST(ClockMap, FollowsAStepOfTheSourceClock) {
  prof::ClockMap m;
  // CLOCK_REALTIME stepped forward by 1 s between two calibrations (NTP): each side keeps its own offset.
  m.add(100'000'000, 0);
  m.add(1'200'000'000, 100'000'000);
  EXPECT_EQ(m.to_monotonic(150'000'000), 50'000'000);
  EXPECT_EQ(m.to_monotonic(1'250'000'000), 150'000'000);
}

TEST(ClockMap, IgnoresPairsThatDoNotAdvance) {
  prof::ClockMap m;
  m.add(1000, 10);
  m.add(900, 20);
  EXPECT_EQ(m.pairs(), 1u);
}

// ---- naming ----------------------------------------------------------------------------------------------------

TEST(GpuRecords, StagesLanesAndNames) {
  EXPECT_EQ(prof::stage_for(kernel(1, 0, 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")), Stage::nccl);
  // what CUPTI really reports: the mangled C++ name
  EXPECT_EQ(prof::stage_for(
                kernel(1, 0, 1, "_Z29ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE")),
            Stage::nccl);
  EXPECT_EQ(prof::stage_for(
                kernel(1, 0, 1, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_")),
            Stage::kernel);
  EXPECT_EQ(prof::stage_for(kernel(1, 0, 1, "void at::native::vectorized_elementwise_kernel")), Stage::kernel);
  EXPECT_EQ(prof::stage_for(copy(1, MemKind::pinned, MemKind::device, 8, 0, 1)), Stage::memcpy_h2d);
  EXPECT_EQ(prof::stage_for(copy(1, MemKind::pageable, MemKind::device, 8, 0, 1)), Stage::memcpy_h2d);
  EXPECT_EQ(prof::stage_for(copy(1, MemKind::device, MemKind::pinned, 8, 0, 1)), Stage::memcpy_d2h);
  EXPECT_EQ(prof::stage_for(copy(1, MemKind::device, MemKind::device, 8, 0, 1)), Stage::memcpy_d2d);
  ActivityRecord peer = copy(1, MemKind::device, MemKind::device, 8, 0, 1);
  peer.peer = true;
  EXPECT_EQ(prof::stage_for(peer), Stage::memcpy_d2d);
  EXPECT_EQ(prof::stage_for(api(1, 1, 0, 1)), Stage::cuda_api);
  ActivityRecord s;
  s.kind = ActivityKind::sync;
  s.sync = prof::SyncKind::stream_synchronize;
  EXPECT_EQ(prof::stage_for(s), Stage::sync);
  EXPECT_EQ(prof::display_name(s), "cudaStreamSynchronize");

  EXPECT_EQ(prof::gpu_lane_name(0, 7), "gpu0/stream7");
  EXPECT_EQ(prof::display_name(copy(1, MemKind::pinned, MemKind::device, 8, 0, 1)), "memcpy HtoD pinned->device");
  EXPECT_EQ(prof::display_name(copy(1, MemKind::device, MemKind::pageable, 8, 0, 1)), "memcpy DtoH device->pageable");
  EXPECT_EQ(prof::display_name(kernel(1, 0, 1, "_Z6matmulPKfS0_Pfi")),
            "matmul(float const*, float const*, float*, int)");
  EXPECT_EQ(prof::display_name(kernel(1, 0, 1, "_Znot_really_mangled(")), "_Znot_really_mangled(");
}

// ---- collector with the fake source ----------------------------------------------------------------------------

struct Rig {
  std::shared_ptr<ddp::testing::FakeActivitySource::Control> ctl =
      std::make_shared<ddp::testing::FakeActivitySource::Control>();
  MemorySink sink;
  std::unique_ptr<prof::ActivityCollector> col;
  explicit Rig(bool identity = true, int64_t offset = 0) {
    ctl->identity_clock = identity;
    ctl->clock_offset_ns = offset;
    prof::CollectorOptions o;
    o.flush_ms = 0;  // the test flushes
    col = std::make_unique<prof::ActivityCollector>(std::make_unique<ddp::testing::FakeActivitySource>(ctl), sink, o);
  }
  void push(std::vector<ActivityRecord> b) { ddp::testing::FakeActivitySource::push(*ctl, std::move(b)); }
};

TEST(ActivityCollector, KernelLinksToTheApiCallThatLaunchedIt) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.col->mark_step({3, 1, 0}, 1'000);
  rig.col->mark_step({4, 1, 0}, 5'000);
  // Launched in step 3 (API call at 2'000), runs in step 4's time (6'000): it belongs to step 3.
  rig.push({api(42, 77, 2'000, 2'100), kernel(42, 6'000, 7'000, "ampere_sgemm_128x64_nn")});
  rig.col->flush();
  auto st = rig.col->stats();
  EXPECT_EQ(st.kernels, 1u);
  EXPECT_EQ(st.api_calls, 1u);
  EXPECT_EQ(st.gpu_linked, 1u);
  auto k = rig.sink.with(Stage::kernel);
  auto a = rig.sink.with(Stage::cuda_api);
  ASSERT_EQ(k.size(), 1u);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(k[0].item, 42u);  // the correlation id
  EXPECT_EQ(a[0].item, 42u);
  EXPECT_EQ(k[0].step, 3u);
  EXPECT_EQ(k[0].epoch, 1u);
  EXPECT_EQ(a[0].step, 3u);
  EXPECT_EQ(k[0].t0, 6'000);
  EXPECT_EQ(k[0].t1, 7'000);
  EXPECT_EQ(rig.sink.lane_of(k[0]), "gpu0/stream7");
  EXPECT_EQ(rig.sink.lane_of(a[0]), "cuda_api/0");
  EXPECT_EQ(rig.sink.name_of(k[0]), "ampere_sgemm_128x64_nn");
  EXPECT_EQ(rig.sink.name_of(a[0]), "cudaLaunchKernel");
  rig.col->stop();
}

TEST(ActivityCollector, GpuRecordWaitsForAnApiRecordDeliveredLater) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.col->mark_step({10, 0, 0}, 0);
  rig.col->mark_step({11, 0, 0}, 3'000);
  // CUPTI's GPU buffer completes before the API buffer: the kernel arrives first, in another flush.
  rig.push({kernel(5, 4'000, 4'500)});
  rig.col->flush();
  EXPECT_TRUE(rig.sink.with(Stage::kernel).empty()) << "an unmatched kernel should wait for its API record";
  rig.push({api(5, 1, 1'000, 1'100)});
  rig.col->flush();
  auto k = rig.sink.with(Stage::kernel);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].step, 10u);  // the launching call's step, not the kernel's own time
  EXPECT_EQ(rig.col->stats().gpu_linked, 1u);
  rig.col->stop();
}

TEST(ActivityCollector, UnmatchedGpuRecordGoesOutUnlinkedAfterAFewFlushes) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.col->mark_step({1, 0, 0}, 0);
  rig.col->mark_step({2, 0, 0}, 10'000);
  rig.push({kernel(99, 12'000, 13'000)});
  for (int i = 0; i < 4; ++i) rig.col->flush();
  auto k = rig.sink.with(Stage::kernel);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].step, 2u);  // its own time's step
  EXPECT_EQ(k[0].item, 99u);
  EXPECT_EQ(rig.col->stats().gpu_linked, 0u);
  rig.col->stop();
}

TEST(ActivityCollector, StopWritesPendingRecords) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.push({kernel(7, 100, 200), copy(8, MemKind::pinned, MemKind::device, 4096, 300, 400)});
  auto st = rig.col->stop();
  EXPECT_EQ(rig.sink.got.size(), 2u);
  EXPECT_EQ(st.events_written, 2u);
  EXPECT_EQ(st.records, 2u);
  EXPECT_TRUE(rig.ctl->stopped);
}

TEST(ActivityCollector, SyncWaitsGoOnTheCallingThreadsLane) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  ActivityRecord s;
  s.kind = ActivityKind::sync;
  s.sync = prof::SyncKind::stream_synchronize;
  s.correlation = 31;
  s.start = 1'010;
  s.end = 1'900;
  ActivityRecord orphan = s;
  orphan.correlation = 32;
  rig.push({api(30, 555, 900, 950), api(31, 666, 1'000, 2'000, "cudaStreamSynchronize"), s, orphan});
  rig.col->stop();
  auto sy = rig.sink.with(Stage::sync);
  ASSERT_EQ(sy.size(), 2u);
  std::map<uint32_t, std::string> lane_by_corr;
  for (const auto& e : sy) lane_by_corr[e.item] = rig.sink.lane_of(e);
  EXPECT_EQ(lane_by_corr[31], "cuda_api/1");  // thread 666 is the second thread seen
  EXPECT_EQ(lane_by_corr[32], "cuda_api/sync");
  EXPECT_EQ(rig.sink.name_of(sy[0]), "cudaStreamSynchronize");
  EXPECT_EQ(rig.col->stats().syncs, 2u);
}

TEST(ActivityCollector, CopiesCarryBytesAndPinnedPageableTotals) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.push({copy(1, MemKind::pinned, MemKind::device, 1 << 20, 0, 50'000),
            copy(2, MemKind::pageable, MemKind::device, 1 << 20, 100'000, 250'000),
            copy(3, MemKind::device, MemKind::pageable, 100, 300'000, 301'000)});
  auto st = rig.col->stop();
  EXPECT_EQ(st.memcpys, 3u);
  EXPECT_EQ(st.memcpy_bytes_pinned, 1u << 20);
  EXPECT_EQ(st.memcpy_bytes_pageable, 1u << 20);
  EXPECT_EQ(st.memcpy_ns_pinned, 50'000);
  EXPECT_EQ(st.memcpy_ns_pageable, 150'000);
  auto h2d = rig.sink.with(Stage::memcpy_h2d);
  ASSERT_EQ(h2d.size(), 2u);
  EXPECT_EQ(h2d[0].value, 1u << 20);
  EXPECT_EQ(rig.sink.lane_of(h2d[0]), "gpu0/stream13");
  EXPECT_EQ(rig.sink.name_of(h2d[0]), "memcpy HtoD pinned->device");
  EXPECT_EQ(rig.sink.name_of(h2d[1]), "memcpy HtoD pageable->device");
  EXPECT_EQ(rig.sink.with(Stage::memcpy_d2h).size(), 1u);
}

TEST(ActivityCollector, NcclKernelsAreCountedAndLaneAndNameTablesAreShared) {
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.push({kernel(1, 0, 10, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 20),
            kernel(2, 20, 30, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 20), kernel(3, 5, 15, "gemm", 1, 7)});
  auto st = rig.col->stop();
  EXPECT_EQ(st.nccl_kernels, 2u);
  EXPECT_EQ(st.kernels, 3u);
  auto n = rig.sink.with(Stage::nccl);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].bucket, n[1].bucket);  // one interned name
  EXPECT_EQ(rig.sink.lane_of(n[0]), "gpu0/stream20");
  EXPECT_EQ(rig.sink.lane_of(rig.sink.with(Stage::kernel).at(0)), "gpu1/stream7");
}

TEST(ActivityCollector, RecordsFlushedBeforeTheGpuFinishedAreDropped) {
  // A forced flush (a failing rank) hands over kernels still running with start = end = 0; drawn, they would sit at
  // the clock's origin. Records ending before they start are as unusable.
  Rig rig;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.push({kernel(1, 100, 200, "gemm", 0, 7), kernel(2, 0, 0, "gemm", 0, 7), kernel(3, 300, 250, "gemm", 0, 7)});
  auto st = rig.col->stop();
  EXPECT_EQ(st.incomplete, 2u);
  EXPECT_EQ(st.kernels, 1u);
  ASSERT_EQ(rig.sink.with(Stage::kernel).size(), 1u);
  EXPECT_EQ(rig.sink.with(Stage::kernel)[0].item, 1u);  // the correlation id of the one complete record
}

TEST(ActivityCollector, MapsTheSourceClockOntoMonotonic) {
  // The fake source's clock runs 1000 s ahead of CLOCK_MONOTONIC (like CUPTI's CLOCK_REALTIME default).
  const int64_t offset = 1'000'000'000'000;
  Rig rig(/*identity=*/false, offset);
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  const int64_t now = prof::monotonic_ns();
  rig.push({kernel(1, static_cast<uint64_t>(now + offset), static_cast<uint64_t>(now + offset + 5'000))});
  rig.col->stop();
  ASSERT_EQ(rig.sink.got.size(), 1u);
  EXPECT_FALSE(rig.col->clock().identity());
  EXPECT_EQ(rig.sink.got[0].t0, now);  // the fake pairs are exact
  EXPECT_EQ(rig.sink.got[0].t1, now + 5'000);
}

TEST(ActivityCollector, LostLanesAreCountedNotFatal) {
  Rig rig;
  rig.sink.max_lanes = 1;
  std::string err;
  ASSERT_TRUE(rig.col->start(err)) << err;
  rig.push({kernel(1, 0, 10, "a", 0, 1), kernel(2, 0, 10, "b", 0, 2)});
  auto st = rig.col->stop();
  EXPECT_EQ(rig.sink.got.size(), 1u);
  EXPECT_EQ(st.lost, 1u);
}

TEST(ActivityCollector, FailingSourceReportsWhy) {
  Rig rig;
  rig.ctl->fail_start = true;
  rig.ctl->fail_reason = "CUPTI: no NVIDIA driver";
  std::string err;
  EXPECT_FALSE(rig.col->start(err));
  EXPECT_EQ(err, "CUPTI: no NVIDIA driver");
  rig.col->flush();  // inert, no crash
  auto st = rig.col->stop();
  EXPECT_EQ(st.records, 0u);
}

TEST(ActivityCollector, PeriodicFlushThreadDeliversWithoutExplicitFlush) {
  auto ctl = std::make_shared<ddp::testing::FakeActivitySource::Control>();
  ctl->identity_clock = true;
  MemorySink sink;
  prof::CollectorOptions o;
  o.flush_ms = 5;
  prof::ActivityCollector col(std::make_unique<ddp::testing::FakeActivitySource>(ctl), sink, o);
  std::string err;
  ASSERT_TRUE(col.start(err)) << err;
  ddp::testing::FakeActivitySource::push(*ctl, {api(1, 1, 0, 1), kernel(1, 2, 3)});
  for (int i = 0; i < 400 && col.stats().events_written < 2; ++i) usleep(5'000);
  EXPECT_EQ(col.stats().events_written, 2u);
  col.stop();
}

// ---- through the real recorder ---------------------------------------------------------------------------------

TEST(GpuRecording, EventsNamesAndLanesReachTheTraceFile) {
  prof::RecorderConfig cfg;
  cfg.path = temp_file("gpu.ddpt");
  cfg.flush_ms = 5;
  std::string err;
  ASSERT_TRUE(prof::start(cfg, err)) << err;
  prof::name_this_thread("main");
  auto ctl = std::make_shared<ddp::testing::FakeActivitySource::Control>();
  ctl->identity_clock = true;
  prof::GpuRecordingOptions go;
  go.flush_ms = 0;
  ASSERT_TRUE(prof::gpu_start(std::make_unique<ddp::testing::FakeActivitySource>(ctl), go, err)) << err;
  EXPECT_TRUE(prof::gpu_recording());
  std::string why;
  EXPECT_FALSE(prof::gpu_start(std::make_unique<ddp::testing::FakeActivitySource>(ctl), go, why));
  EXPECT_NE(why.find("already"), std::string::npos);
  prof::set_context({/*step=*/6, /*epoch=*/0, /*micro=*/0});
  prof::gpu_mark_step({6, 0, 0});
  const auto t = static_cast<uint64_t>(prof::monotonic_ns());
  { prof::Span sp(Stage::forward); }
  ddp::testing::FakeActivitySource::push(*ctl,
                                         {api(9, 1, t, t + 100), kernel(9, t + 200, t + 900, "relu_kernel", 0, 7)});
  prof::gpu_flush();
  prof::CollectorStats gs = prof::gpu_stop();
  EXPECT_FALSE(prof::gpu_recording());
  EXPECT_EQ(gs.gpu_linked, 1u);
  prof::stop();

  auto r = read_trace_file(cfg.path);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(r.trace.damage.empty()) << r.trace.damage;
  const Event* k = nullptr;
  const Event* a = nullptr;
  const Event* f = nullptr;
  for (const auto& e : r.trace.events) {
    if (e.stage_id() == Stage::kernel) k = &e;
    if (e.stage_id() == Stage::cuda_api) a = &e;
    if (e.stage_id() == Stage::forward) f = &e;
  }
  ASSERT_TRUE(k && a && f);
  EXPECT_EQ(r.trace.lane_name(k->lane), "gpu0/stream7");
  EXPECT_EQ(r.trace.lane_name(a->lane), "cuda_api/0");
  EXPECT_EQ(r.trace.lane_name(f->lane), "main");
  EXPECT_NE(k->lane, f->lane);
  EXPECT_EQ(k->item, 9u);
  EXPECT_EQ(k->step, 6u);
  EXPECT_EQ(k->t0, static_cast<int64_t>(t + 200));
  EXPECT_EQ(r.trace.meta.at("gpu_name/" + std::to_string(k->bucket)), "relu_kernel");
  EXPECT_EQ(r.trace.meta.at("gpu_name/" + std::to_string(a->bucket)), "cudaLaunchKernel");
}

TEST(GpuRecording, RefusesWithoutARunningRecorder) {
  auto ctl = std::make_shared<ddp::testing::FakeActivitySource::Control>();
  std::string why;
  EXPECT_FALSE(prof::gpu_start(std::make_unique<ddp::testing::FakeActivitySource>(ctl), {}, why));
  EXPECT_NE(why.find("recorder"), std::string::npos);
  prof::gpu_mark_step({1, 0, 0});  // no-ops
  prof::gpu_flush();
  EXPECT_EQ(prof::gpu_stop().records, 0u);
}

// ---- the real CUPTI source -------------------------------------------------------------------------------------

bool has_gpu() { return fs::exists("/dev/nvidia0") || fs::exists("/dev/nvidiactl"); }

TEST(CuptiSource, FailsGracefullyWithoutAGpu) {
  if (!prof::cupti_available()) {
    EXPECT_EQ(prof::make_cupti_source({}), nullptr);
    GTEST_SKIP() << "built without CUPTI";
  }
  if (has_gpu()) GTEST_SKIP() << "a GPU is present: the device check exercises CUPTI for real";
  auto src = prof::make_cupti_source({});
  ASSERT_NE(src, nullptr);
  std::string err;
  bool started = src->start([](const ActivityRecord*, size_t) {}, err);
  EXPECT_FALSE(started);
  EXPECT_NE(err.find("CUPTI"), std::string::npos) << err;
  EXPECT_NE(err.find("not recorded"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
  src->flush(true);  // inert
  src->stop();
  uint64_t s = 0;
  int64_t m = 0;
  EXPECT_FALSE(src->clock_pair(s, m));
  std::cerr << "CUPTI without a GPU says: " << err << "\n";

  // And through the process-wide entry point, with a recorder running: training would go on.
  prof::RecorderConfig cfg;
  cfg.path = temp_file("nogpu.ddpt");
  ASSERT_TRUE(prof::start(cfg, err)) << err;
  std::string why;
  EXPECT_FALSE(prof::gpu_start(prof::GpuRecordingOptions{}, why));
  EXPECT_NE(why.find("CUPTI"), std::string::npos) << why;
  EXPECT_FALSE(prof::gpu_recording());
  prof::stop();
}

}  // namespace
