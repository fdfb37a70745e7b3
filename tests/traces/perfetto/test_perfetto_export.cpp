// --export --format perfetto read back with Perfetto's published schema (tests/data/perfetto_proto, decoded by
// protoc --decode, an independent protobuf implementation): the tracks, nested slices, interned names, debug
// annotations, counters and flows of a run written by hand; a real PyTorch profiler run of two ranks as one file and
// as a tar of one file per rank with a perfetto_manifest; and its size against the JSON export's.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "tests/traces/kineto/kineto_test_files.h"
#include "traces/chrome/chrome_export.h"
#include "traces/kineto/kineto_import.h"
#include "traces/perfetto/perfetto_export.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

const std::string kProto = std::string(DDP_SOURCE_DIR) + "/tests/data/perfetto_proto";

std::string shell(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  if (rc) *rc = status;
  return out;
}

bool have_protoc() { return shell("command -v protoc").find("protoc") != std::string::npos; }

// The trace in protobuf text format, decoded by protoc with Perfetto's schema; fails the test when it does not decode.
std::string decode(const std::string& path) {
  int rc = 0;
  const std::string text = shell(
      "protoc --proto_path=" + kProto + " --decode=perfetto.protos.Trace perfetto_trace.proto < '" + path + "' 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << text.substr(0, 2000);
  return text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

std::string temp_path(const std::string& name) {
  const std::string d = fs::temp_directory_path().string() + "/ddp_perfetto_" + std::to_string(::getpid());
  fs::create_directories(d);
  return d + "/" + name;
}

// Two ranks: a step holding forward and backward on the main lane, two gradient buckets' allreduces on the comm lane,
// a span that outlasts its parent, and a counter.
RunTrace hand_made_run() {
  RunTrace run;
  for (uint32_t r : {0u, 1u}) {
    RankTrace t;
    t.rank = r;
    t.world = 2;
    t.complete = true;
    t.lanes = {"main", "comm"};
    auto span = [&](Stage s, uint8_t lane, int64_t a, int64_t b, uint32_t step, uint16_t bucket = kNoBucket) {
      Event e = make_span(s, lane, a, b);
      e.step = step;
      e.bucket = bucket;
      t.events.push_back(e);
    };
    span(Stage::step, 0, 1000, 2000, 0);
    span(Stage::forward, 0, 1000, 1300, 0);
    span(Stage::backward, 0, 1300, 1700, 0);
    span(Stage::optimizer, 0, 1900, 2100, 0);  // outlasts its step: ends with it
    span(Stage::allreduce, 1, 1500, 1800, 0, 0);
    span(Stage::allreduce, 1, 1800, 1950, 0, 1);
    Event c;
    c.kind = static_cast<uint8_t>(EventKind::counter);
    c.stage = 0;
    c.t0 = 1500;
    c.value = 4096;
    t.events.push_back(c);
    run.ranks.push_back(std::move(t));
  }
  return run;
}

TEST(PerfettoExport, AHandMadeRunDecodesWithPerfettosSchema) {
  if (!have_protoc()) GTEST_SKIP() << "protoc not found (Debian: protobuf-compiler; scripts/setup.sh installs it)";
  const RunTrace run = hand_made_run();
  PerfettoExportStats stats;
  std::string err;
  const std::string path = temp_path("hand.pftrace");
  ASSERT_TRUE(export_perfetto(run, path, stats, err)) << err;
  EXPECT_EQ(stats.slices, 12u);
  EXPECT_EQ(stats.clipped, 2u);
  EXPECT_EQ(stats.flows, 4u);  // each rank: backward -> bucket 0 and bucket 1
  const std::string t = decode(path);
  EXPECT_EQ(count(t, "process_name: \"rank 0\""), 1u) << t.substr(0, 3000);
  EXPECT_EQ(count(t, "process_name: \"rank 1\""), 1u);
  EXPECT_EQ(count(t, "thread_name: \"comm\""), 2u);
  EXPECT_EQ(count(t, "type: TYPE_SLICE_BEGIN"), 12u);
  EXPECT_EQ(count(t, "type: TYPE_SLICE_END"), 12u);
  EXPECT_EQ(count(t, "type: TYPE_COUNTER"), 2u);
  EXPECT_EQ(count(t, "counter_value: 4096"), 2u);
  EXPECT_EQ(count(t, "flow_ids:"), 4u + count(t, "terminating_flow_ids:"));
  EXPECT_EQ(count(t, "terminating_flow_ids:"), 4u);
  // Names interned once per rank's sequence: "backward" is spelled twice in all, used by two slices.
  EXPECT_EQ(count(t, "name: \"backward\""), 2u);
  EXPECT_EQ(count(t, "name: \"step\""), 2u * 2);  // the stage (event name) and the debug annotation, per rank
  EXPECT_EQ(count(t, "sequence_flags: 1"), 2u);   // each rank's sequence starts by clearing its state
  // The optimizer span ends with the step that encloses it: at 2000 ns, not 2100, on rank 0's clock from time zero.
  EXPECT_EQ(count(t, "timestamp: 1100\n"), 0u);
  EXPECT_EQ(count(t, "timestamp: 1000\n"), 4u) << "the step ends at 1000 ns, and the optimizer with it";
}

TEST(PerfettoExport, ARealPyTorchRunAsOneFileAndAsATarOfRanksWithAManifest) {
  if (!have_protoc()) GTEST_SKIP() << "protoc not found (Debian: protobuf-compiler; scripts/setup.sh installs it)";
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load_kineto_run(
      {ddptest::kineto_rank_file("slow-data-rank1", 0), ddptest::kineto_rank_file("slow-data-rank1", 1)},
      KinetoStageMap{}, run, err))
      << err;
  PerfettoExportStats one;
  const std::string single = temp_path("real.pftrace");
  ASSERT_TRUE(export_perfetto(run, single, one, err)) << err;
  const std::string t = decode(single);
  EXPECT_EQ(count(t, "type: TYPE_SLICE_BEGIN"), one.slices);
  EXPECT_GT(one.slices, 100u);
  EXPECT_EQ(count(t, "type: TYPE_SLICE_BEGIN"), count(t, "type: TYPE_SLICE_END"));
  // Against the JSON export of the same run: a fraction of its bytes.
  ExportStats json;
  ASSERT_TRUE(export_chrome(run, temp_path("real.json"), json, err)) << err;
  std::cout << "perfetto " << one.bytes << " bytes, JSON " << json.bytes
            << " bytes: " << static_cast<double>(one.bytes) / static_cast<double>(json.bytes) << "x\n";
  EXPECT_LE(static_cast<double>(one.bytes), 0.3 * static_cast<double>(json.bytes));

  PerfettoExportStats many;
  const std::string tar = temp_path("real.tar");
  ASSERT_TRUE(export_perfetto(run, tar, many, err)) << err;
  const std::string listing = shell("tar -tf '" + tar + "' 2>&1");
  EXPECT_EQ(listing, "rank0.pftrace\nrank1.pftrace\nperfetto_manifest.json\n");
  const std::string dir = temp_path("untar");
  fs::create_directories(dir);
  shell("tar -xf '" + tar + "' -C '" + dir + "'");
  const std::string manifest = shell("cat '" + dir + "/perfetto_manifest.json'");
  EXPECT_EQ(manifest.rfind("{\n  \"perfetto_manifest\"", 0), 0u) << manifest;  // detected by content, as Perfetto does
  EXPECT_NE(manifest.find("\"path\": \"rank1.pftrace\""), std::string::npos) << manifest;
  const std::string r0 = decode(dir + "/rank0.pftrace"), r1 = decode(dir + "/rank1.pftrace");
  EXPECT_EQ(count(r0, "TYPE_SLICE_BEGIN") + count(r1, "TYPE_SLICE_BEGIN"), one.slices);
  EXPECT_EQ(count(r1, "process_name: \"rank 1"), 1u);
  EXPECT_EQ(count(r1, "process_name: \"rank 0"), 0u);
}

}  // namespace
