// A span's CPU split (traces/model/span_cpu.h): written as a cpu event after its span, folded into RankTrace::cpu by
// the native reader, written back by write_native_traces, and dropped with its span.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/remove_tree.h"
#include "traces/model/run_folder.h"
#include "traces/native/trace_reader.h"
#include "traces/native/trace_writer.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

Event span(Stage s, uint8_t lane, int64_t t0, int64_t t1, uint32_t item = 0) {
  Event e = make_span(s, lane, t0, t1);
  e.item = item;
  return e;
}

TEST(SpanCpu, TakenOutOfTheEventsAndAttachedToTheirSpans) {
  std::vector<Event> events = {span(Stage::forward, 0, 100, 200), span(Stage::disk_read, 1, 110, 300, 7)};
  events.push_back(cpu_event(events[1], 150'000, 20'400));  // lane 1's read: 150 us on a CPU, 20.4 us waiting
  events.push_back(cpu_event(events[0], 80'000, -1));       // lane 0's forward: no run-queue statistics
  Event counter;
  counter.kind = static_cast<uint8_t>(EventKind::counter);
  counter.lane = 0;
  events.push_back(counter);
  events.push_back(span(Stage::backward, 0, 210, 400));
  const std::vector<SpanCpu> cpu = take_cpu_events(events);
  ASSERT_EQ(events.size(), 4u) << "spans and counters stay, cpu events go";
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_EQ(cpu[0].event, 0u);
  EXPECT_EQ(cpu[0].cpu_us, 80u);
  EXPECT_FALSE(cpu[0].wait_known());
  EXPECT_EQ(cpu[1].event, 1u);
  EXPECT_EQ(cpu[1].cpu_us, 150u);
  EXPECT_EQ(cpu[1].wait_us, 20u);
  EXPECT_EQ(events[1].item, 7u) << "the span keeps its own item";
}

// A cpu event whose span was dropped (a full ring), or that follows another event of its lane, belongs to no span.
TEST(SpanCpu, AnOrphanCpuEventIsDropped) {
  const Event a = span(Stage::forward, 0, 100, 200);
  std::vector<Event> events = {cpu_event(a, 1000, 0), span(Stage::backward, 0, 200, 300)};
  events.push_back(cpu_event(a, 1000, 0));  // after backward, with forward's times
  EXPECT_TRUE(take_cpu_events(events).empty());
  EXPECT_EQ(events.size(), 1u);
}

TEST(SpanCpu, ANativeTraceKeepsTheSplitsThroughReadAndWrite) {
  const fs::path dir = fs::temp_directory_path() / ("ddp_span_cpu_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  RankTrace t;
  t.rank = 0;
  t.world = 1;
  t.lanes = {"main", "loader/0"};
  t.events = {span(Stage::forward, 0, 100, 5000), span(Stage::disk_read, 1, 200, 9000, 3),
              span(Stage::backward, 0, 5000, 12000)};
  t.cpu = {{0, 4, 1}, {2, 7, kWaitUnknown}};
  std::string err;
  ASSERT_TRUE(write_native_traces(dir.string(), {t}, 1, err)) << err;
  const TraceReadResult r = read_trace_file(in_run(dir.string(), rank_trace_file(0)));
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.trace.events.size(), 3u);
  ASSERT_EQ(r.trace.cpu.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const SpanCpu& c = r.trace.cpu[i];
    EXPECT_EQ(r.trace.events[c.event].stage_id(), t.events[t.cpu[i].event].stage_id());
    EXPECT_EQ(c.cpu_us, t.cpu[i].cpu_us);
    EXPECT_EQ(c.wait_us, t.cpu[i].wait_us);
  }
  for (size_t i = 0; i < r.trace.events.size(); ++i) {
    if (r.trace.events[i].stage_id() != Stage::disk_read) continue;
    EXPECT_EQ(r.trace.cpu_of(i), nullptr) << "it had none";
  }
  ddp::testing::remove_tree(dir.string());
}

}  // namespace
