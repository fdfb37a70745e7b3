// --steps A-B on big traces: the window kept by every command, the merged export of only those steps (every event in
// the window's time, every flow with both ends), gzip output read back, the window suggested when a JSON output is
// too big for Perfetto UI, and --diff of one profiling cycle against another.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/traces/kineto/kineto_test_files.h"
#include "traces/analysis/summary.h"
#include "traces/base/json_out.h"
#include "traces/base/read_progress.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/diff/run_diff.h"
#include "traces/kineto/kineto_import.h"
#include "traces/kineto/kineto_merge.h"
#include "traces/model/step_window.h"

namespace fs = std::filesystem;
using namespace ddp;

namespace {

const std::string kCpu = ddptest::kKinetoCpu;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("ddp_steps_" + name + "_" + std::to_string(::getpid()))).string();
}

RunTrace load(const std::vector<std::string>& inputs, int cycle = 0) {
  RunTrace run;
  std::string err;
  EXPECT_TRUE(load_kineto_run(inputs, KinetoStageMap{}, run, err, cycle)) << err;
  return run;
}

nlohmann::json read_json(const std::string& path) {
  std::string text;
  EXPECT_TRUE(read_chrome_bytes(path, text).ok()) << path;
  return nlohmann::json::parse(text);
}

TEST(StepWindow, ParsesRangesAndOneStepAndNamesBadOnes) {
  StepWindow w;
  std::string err;
  ASSERT_TRUE(parse_step_window("10-19", w, err)) << err;
  EXPECT_EQ(w.first, 10u);
  EXPECT_EQ(w.last, 19u);
  ASSERT_TRUE(parse_step_window("7", w, err));
  EXPECT_EQ(w.first, 7u);
  EXPECT_EQ(w.last, 7u);
  for (const char* bad : {"", "9-3", "a-b", "1-", "-4", "1-2-3", "99999999999"}) {
    EXPECT_FALSE(parse_step_window(bad, w, err)) << bad;
    EXPECT_NE(err.find("--steps"), std::string::npos) << err;
  }
  EXPECT_TRUE(StepWindow{}.everything());
}

TEST(StepWindow, KeepsOnlyTheWindowsStepsOnEveryRankOrNamesTheRunsSteps) {
  RunTrace run = load({kCpu + "/slow-data-rank1"});
  uint32_t first = 0, last = 0;
  ASSERT_TRUE(step_range(run, first, last));
  std::string err;
  RunTrace outside = run;
  EXPECT_FALSE(keep_steps(outside, {last + 10, last + 20}, err));
  EXPECT_NE(err.find("the traces hold steps " + std::to_string(first) + "-" + std::to_string(last)), std::string::npos)
      << err;
  ASSERT_TRUE(keep_steps(run, {5, 8}, err)) << err;
  for (const RankTrace& r : run.ranks) {
    std::set<uint32_t> steps;
    for (const Event& e : r.events) {
      ASSERT_TRUE(!e.is_span() || (e.step >= 5 && e.step <= 8)) << e.step;
      if (e.is_span() && e.stage_id() == Stage::step) steps.insert(e.step);
    }
    EXPECT_EQ(steps, (std::set<uint32_t>{5, 6, 7, 8}));
  }
  ASSERT_TRUE(run.step_window.has_value());
  EXPECT_EQ(run.step_window->first, 5u);
  EXPECT_EQ(run.step_window->last, 8u);
  EXPECT_EQ(run.exported_manifest()["step_window"], nlohmann::json::array({5, 8}));
  EXPECT_EQ(summarize(run).front().steps, 4u);
}

// The merged export of a window holds the original events of that time only, and no flow with one end missing.
// A flow from step 4 to step 6 of rank 0: with --steps 5-8 one of its ends is outside, so it is not exported.
std::string with_a_flow_across_the_window(const std::string& scenario) {
  const std::string d = temp_path("flow");
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(kCpu + "/" + scenario)) {
    nlohmann::json j = read_json(e.path().string());
    if (e.path().filename().string().rfind("rank0.", 0) == 0) {
      nlohmann::json planted = nlohmann::json::array();
      for (const auto& ev : j["traceEvents"]) {
        const std::string name = ev.value("name", "");
        for (auto [step, ph] : {std::pair{"ProfilerStep#4", "s"}, std::pair{"ProfilerStep#6", "f"}})
          if (name == step)
            planted.push_back({{"ph", ph},
                               {"id", 987654},
                               {"pid", ev["pid"]},
                               {"tid", ev["tid"]},
                               {"name", "planted"},
                               {"cat", "planted"},
                               {"bp", "e"},
                               {"ts", ev["ts"].get<double>() + 1}});
      }
      EXPECT_EQ(planted.size(), 2u);
      for (auto& p : planted) j["traceEvents"].push_back(p);
    }
    std::ofstream(d + "/" + e.path().stem().string()) << j.dump();  // without .gz: written plain
  }
  return d;
}

TEST(StepWindow, MergedExportOfAWindowHoldsItsTimeAndWholeFlows) {
  const std::string d = with_a_flow_across_the_window("slow-data-rank1");
  RunTrace whole = load({d});
  RunTrace run = whole;
  std::string err;
  ASSERT_TRUE(keep_steps(run, {5, 8}, err)) << err;
  const std::string all_path = temp_path("all") + ".json", window_path = temp_path("window") + ".json";
  ExportStats all_stats, window_stats;
  ASSERT_TRUE(export_kineto_merged(whole, all_path, all_stats, err)) << err;
  ASSERT_TRUE(export_kineto_merged(run, window_path, window_stats, err)) << err;
  EXPECT_LT(window_stats.events * 4, all_stats.events) << "4 of 30 steps";
  const nlohmann::json j = read_json(window_path);
  // The window's time on the merged clock: from the stage processes' step spans (pid = rank).
  double t0 = 1e300, t1 = -1e300;
  std::map<std::string, std::set<char>> flow_ends;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("name", "") == "step" && e["pid"].get<uint64_t>() < 16) {
      t0 = std::min(t0, e["ts"].get<double>());
      t1 = std::max(t1, e["ts"].get<double>() + e["dur"].get<double>());
    }
    const std::string ph = e.value("ph", "");
    if (ph == "s" || ph == "f") flow_ends[e["id"].dump()].insert(ph[0]);
  }
  ASSERT_LT(t0, t1);
  size_t originals = 0;
  for (const auto& e : j["traceEvents"])
    if (e.value("ph", "") == "X" && e["pid"].get<uint64_t>() >= 16) {
      ++originals;
      // GPU-less CPU traces: every original event touches the window (a few ms of slack for the clock offsets).
      EXPECT_GE(e["ts"].get<double>() + e.value("dur", 0.0), t0 - 5000) << e.dump();
      EXPECT_LE(e["ts"].get<double>(), t1 + 5000) << e.dump();
    }
  EXPECT_GT(originals, 100u);
  EXPECT_GT(flow_ends.size(), 10u);
  for (const auto& [id, ends] : flow_ends) EXPECT_EQ(ends.size(), 2u) << "flow " << id;
  size_t planted = 0;
  const nlohmann::json all = read_json(all_path);
  for (const auto& e : all["traceEvents"]) planted += e.value("name", "") == "planted";
  EXPECT_EQ(planted, 2u) << "the whole export keeps the planted flow";
  fs::remove(all_path);
  fs::remove(window_path);
  fs::remove_all(d);
}

// A .gz output is gzip (Perfetto opens it) and reads back as the same JSON as the plain output.
TEST(StepWindow, GzipExportReadsBackAsThePlainOne) {
  RunTrace run = load({kCpu + "/balanced"});
  const std::string plain = temp_path("plain") + ".json", gz = temp_path("gz") + ".json.gz";
  ExportStats a, b;
  std::string err;
  ASSERT_TRUE(export_kineto_merged(run, plain, a, err)) << err;
  ASSERT_TRUE(export_kineto_merged(run, gz, b, err)) << err;
  EXPECT_EQ(a.bytes, b.bytes) << "the JSON's size, before compression";
  EXPECT_LT(fs::file_size(gz) * 4, fs::file_size(plain));
  std::ifstream in(gz, std::ios::binary);
  char magic[2] = {};
  in.read(magic, 2);
  EXPECT_EQ(static_cast<unsigned char>(magic[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(magic[1]), 0x8b);
  EXPECT_EQ(read_json(gz), read_json(plain));
  fs::remove(plain);
  fs::remove(gz);
}

TEST(StepWindow, TheWindowSuggestedForPerfettoFits) {
  // 100 steps in 5 GB, 2 GB allowed: 36 steps (0.9 x 2 / 0.05), starting at the first.
  const StepWindow w = steps_within(10, 109, 5'000'000'000, 2'000'000'000);
  EXPECT_EQ(w.first, 10u);
  EXPECT_EQ(w.last, 45u);
  EXPECT_EQ(steps_within(0, 9, 100, 1'000).last, 9u) << "everything fits";
  EXPECT_EQ(steps_within(3, 9, 1'000'000, 1).last, 3u) << "at least one step";
}

// Cycle 1 against cycle 2 of one job: --diff compares their step breakdowns as two runs.
TEST(StepWindow, DiffOfOneCycleAgainstAnother) {
  const std::string d = temp_path("cycles");
  fs::create_directories(d);
  auto copy_shifted = [&](const std::string& scenario, int rank, int cycle, int64_t shift_ns) {
    nlohmann::json j = read_json(ddptest::kineto_rank_file(scenario, rank));
    j["baseTimeNanoseconds"] = j["baseTimeNanoseconds"].get<int64_t>() + shift_ns;
    std::ofstream(d + "/rank" + std::to_string(rank) + "." + std::to_string(cycle) + ".pt.trace.json") << j.dump();
  };
  // Cycle 1 balanced, cycle 2 (30 s later) with rank 1's slow input.
  for (int r = 0; r < 2; ++r) {
    copy_shifted("balanced", r, 1, 0);
    copy_shifted("slow-data-rank1", r, 2, 30'000'000'000);
  }
  RunTrace c1 = load({d}, 1), c2 = load({d}, 2);
  const RunDiff diff = diff_runs(diff_run_of_traces(c1, 1), diff_run_of_traces(c2, 2));
  const nlohmann::json j = run_diff_json(diff);
  const std::string text = run_diff_text(diff);
  EXPECT_NE(text.find("wait_data"), std::string::npos) << text;
  EXPECT_NE(j.dump().find("\"cycle\""), std::string::npos) << j.dump(1);
  fs::remove_all(d);
}

}  // namespace

namespace {
// The progress a bar draws: the readers report the bytes of JSON text they went through, near the estimate of the
// files' text made before reading (a gzip file's from its trailer).
TEST(ReadProgress, ReadersReportWhatTheyReadAgainstTheEstimate) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kCpu + "/balanced")) files.push_back(e.path().string());
  uint64_t text = 0;
  for (const auto& f : files) {
    std::string t;
    ASSERT_TRUE(read_chrome_bytes(f, t).ok());
    text += t.size();
  }
  const uint64_t estimate = trace_input_bytes({kCpu + "/balanced"});
  EXPECT_EQ(estimate, text) << "one gzip member under 4 GiB: its trailer says the size exactly";
  ReadProgress& p = trace_read_progress();
  p.start(estimate);
  EXPECT_EQ(p.fraction(), 0);
  RunTrace run = load({kCpu + "/balanced"});
  EXPECT_EQ(p.done(), text);
  EXPECT_LT(p.fraction(), 1.0) << "below 1 until the command ends: the total is an estimate";
  EXPECT_GT(p.fraction(), 0.98);
  EXPECT_NE(p.file().find("balanced/rank"), std::string::npos) << p.file();
}
}  // namespace
