// Perfetto's own JSON parser tests (tests/data/perfetto_json, README there) read as the viewer reads them: every one
// loads, as Perfetto loads them — the files that are not strictly JSON (trailing commas, the array format without its
// closing bracket, a trailing empty event) with a note saying so — and instant events are drawn, as zero-length
// slices on their thread or process, as Perfetto shows them.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "traces/timeline/timeline.h"

namespace {
namespace fs = std::filesystem;

const std::string kData = std::string(DDP_SOURCE_DIR) + "/tests/data/perfetto_json/";

struct Loaded {
  bool ok = false;
  std::string error;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> slices;  // name -> (t0, duration), ns
  std::vector<std::string> problems;
  std::string all_problems() const {
    std::string t;
    for (const auto& p : problems) t += p + "\n";
    return t;
  }
};

Loaded load(const std::string& name) {
  ddp::Timeline tl;
  Loaded l;
  l.ok = ddp::timeline_from_chrome_file(kData + name, tl, l.error);
  if (!l.ok) return l;
  for (const auto& p : tl.processes)
    for (const auto& lane : p.lanes)
      for (const auto& row : lane.rows)
        for (const auto& s : row.spans)
          l.slices[std::string(tl.name(s))].push_back({s.t0 + tl.origin_ns, s.t1() - s.t0});
  l.problems = tl.problems;
  return l;
}

TEST(PerfettoJson, EveryOneOfPerfettosParserTestsLoads) {
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(kData)) {
    if (e.path().extension() != ".json") continue;
    ++files;
    const Loaded l = load(e.path().filename().string());
    EXPECT_TRUE(l.ok) << e.path().filename() << ": " << l.error;
  }
  EXPECT_EQ(files, 30u);
}

TEST(PerfettoJson, AnArrayWithoutItsClosingBracketIsReadWithANote) {
  // A writer that died mid-trace: `[` then events, the last followed by a comma, no `]` (Perfetto's
  // test_json_incomplete reads its one slice).
  Loaded l = load("json_incomplete.json");
  ASSERT_TRUE(l.ok) << l.error;
  ASSERT_EQ(l.slices["typecheck"].size(), 1u);
  EXPECT_EQ(l.slices["typecheck"][0].first, int64_t{4619295550000});
  EXPECT_NE(l.all_problems().find("not strictly JSON"), std::string::npos) << l.all_problems();
}

TEST(PerfettoJson, TrailingCommasAfterTheLastEventAndInArgsAreReadWithANote) {
  Loaded t = load("json_trailing_comma.json");
  ASSERT_TRUE(t.ok) << t.error;
  EXPECT_EQ(t.slices["Foo"].size(), 1u);
  EXPECT_EQ(t.slices["Bar"].size(), 1u);
  EXPECT_NEAR(t.slices["Bar"][0].second, 3764289708.0, 1000.0);  // a span keeps long durations to the microsecond
  EXPECT_NE(t.all_problems().find("trailing comma"), std::string::npos) << t.all_problems();
  Loaded a = load("args_ordered.json");
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_NE(a.all_problems().find("trailing comma"), std::string::npos) << a.all_problems();
}

TEST(PerfettoJson, InstantEventsAreZeroLengthSlicesOnTheirThreadOrProcess) {
  Loaded l = load("json_all_slice_types.json");
  ASSERT_TRUE(l.ok) << l.error;
  // Perfetto's expected rows: thread-scoped, default-scoped and process-scoped instants, dur 0; global ones ("g",
  // and the "R" mark with "s": "g") on the one global track, as Perfetto draws them, and no problem said of them.
  for (const char* name :
       {"InstantThread", "Instanti", "InstantDefaultScope", "InstantProcess", "InstantGlobal", "InstantR"}) {
    ASSERT_EQ(l.slices[name].size(), 1u) << name;
    EXPECT_EQ(l.slices[name][0].second, 0) << name;
  }
  EXPECT_EQ(l.slices["InstantThread"][0].first, 320000);
  EXPECT_EQ(l.slices["CompleteEvent"].size(), 1u);
  EXPECT_EQ(l.all_problems().find("global instant"), std::string::npos) << l.all_problems();
}

TEST(PerfettoJson, AStrictFileHasNoLeniencyNote) {
  Loaded l = load("x_event_order.json");
  ASSERT_TRUE(l.ok) << l.error;
  EXPECT_EQ(l.all_problems().find("not strictly JSON"), std::string::npos) << l.all_problems();
  EXPECT_EQ(l.slices["Parent"].size(), 1u);
  EXPECT_EQ(l.slices["Child"].size(), 1u);
}

}  // namespace
