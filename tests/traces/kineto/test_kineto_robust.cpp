// What profilers really write, beyond clean traces: a trace cut off by a killed job, an empty traceEvents, a job
// profiled without prof.step(), negative durations, ranks of different PyTorch versions. Each gives a note or an
// error naming it, never a crash or a silent wrong verdict. Built from the real PyTorch 2.11 traces in tests/data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/traces/kineto/kineto_test_files.h"
#include "traces/analysis/analysis.h"
#include "traces/analysis/summary.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_import.h"
#include "traces/kineto/kineto_merge.h"

namespace fs = std::filesystem;
using namespace ddp;

namespace {

std::string temp_dir(const std::string& name) { return ddptest::kineto_temp_dir("robust_" + name); }
std::string rank_file(const std::string& scenario, int rank) { return ddptest::kineto_rank_file(scenario, rank); }

std::string read_text(const std::string& path) {
  std::string text;
  EXPECT_TRUE(read_chrome_bytes(path, text).ok()) << path;
  return text;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool load(const std::vector<std::string>& inputs, RunTrace& run, std::string& err) {
  return load_kineto_run(inputs, KinetoStageMap{}, run, err);
}

std::string notes_of(const RunTrace& run) {
  std::string all;
  const nlohmann::json report = kineto_report_json(run);  // kept: the loop reads into it
  for (const auto& n : report["notes"]) all += n.get<std::string>() + "\n";
  for (const auto& p : run.problems) all += p + "\n";
  return all;
}

std::set<uint32_t> steps_of(const RankTrace& r) {
  std::set<uint32_t> s;
  for (const Event& e : r.events)
    if (e.is_span() && e.stage_id() == Stage::step) s.insert(e.step);
  return s;
}

// The two ranks of a scenario copied into `d`, rank 1's text changed by `edit`.
void copy_pair(const std::string& scenario, const std::string& d, const std::function<std::string(std::string)>& edit) {
  write_text(d + "/rank0.pt.trace.json", read_text(rank_file(scenario, 0)));
  write_text(d + "/rank1.pt.trace.json", edit(read_text(rank_file(scenario, 1))));
}

// The legacy profiler's Array Format cut by a killed job: no closing `]`. Read as Perfetto reads it (up to the last
// whole event), said as not strictly JSON, and treated as cut off: the incomplete last step is left out.
TEST(KinetoRobust, ALegacyArrayCutOffIsClosedByTheReaderAndItsLastStepLeftOut) {
  const std::string d = temp_dir("legacy_cut");
  const std::string legacy = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-1.13-legacy/slow-data-rank1/";
  for (int r : {0, 1}) {
    std::string text;
    ASSERT_TRUE(read_chrome_bytes(legacy + "legacy_rank" + std::to_string(r) + ".json.gz", text).ok());
    write_text(d + "/rank" + std::to_string(r) + ".json", r == 1 ? text.substr(0, text.size() * 2 / 3) : text);
  }
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load({d}, run, err)) << err;
  ASSERT_EQ(run.ranks.size(), 2u);
  const std::string notes = notes_of(run);
  EXPECT_NE(notes.find("not strictly JSON"), std::string::npos) << notes;
  EXPECT_NE(notes.find("the events array is not closed"), std::string::npos) << notes;
  EXPECT_TRUE(kineto_report_json(run)["files"][1]["cut_off"].get<bool>());
}

// A job killed while rank 1's profiler wrote its trace: the JSON stops in the middle of traceEvents. The events
// before the cut are read, the last step reached is left out as incomplete, the report says so, and the merged
// export writes what was read instead of refusing the file.
TEST(KinetoRobust, TraceCutOffByAKilledJobIsReadUpToTheCut) {
  const std::string d = temp_dir("cut");
  RunTrace whole;
  std::string err;
  ASSERT_TRUE(load({rank_file("slow-data-rank1", 0), rank_file("slow-data-rank1", 1)}, whole, err)) << err;
  copy_pair("slow-data-rank1", d, [](std::string t) { return t.substr(0, t.size() * 2 / 3); });
  RunTrace run;
  ASSERT_TRUE(load({d}, run, err)) << err;
  ASSERT_EQ(run.ranks.size(), 2u);
  const std::string notes = notes_of(run);
  EXPECT_NE(notes.find("rank1.pt.trace.json is cut off"), std::string::npos) << notes;
  EXPECT_NE(notes.find("left out as incomplete"), std::string::npos) << notes;
  // Only whole steps are read: each holds its collective, as every step of the whole file does. (Gloo's two runloop
  // threads take turns and Kineto writes one thread's events before the other's: a cut loses every other step's.)
  const auto cut_steps = steps_of(run.ranks[1]), all_steps = steps_of(whole.ranks[1]);
  EXPECT_FALSE(cut_steps.empty());
  EXPECT_LT(cut_steps.size(), all_steps.size());
  for (uint32_t s : cut_steps) EXPECT_TRUE(all_steps.count(s)) << s;
  std::map<uint32_t, int> collectives;
  for (const Event& e : run.ranks[1].events)
    if (e.is_span() && e.stage_id() == Stage::allreduce) ++collectives[e.step];
  for (uint32_t s : cut_steps) EXPECT_EQ(collectives[s], 1) << "step " << s;
  EXPECT_TRUE(kineto_report_json(run)["files"][1]["cut_off"].get<bool>());
  // The analysis covers the steps both ranks hold, no more.
  const Analysis a = analyze(run);
  EXPECT_LE(a.steps, cut_steps.size()) << analysis_text(a);
  ExportStats stats;
  ASSERT_TRUE(export_kineto_merged(run, d + ".merged.json", stats, err)) << err;
  EXPECT_GT(stats.events, 0u);
  fs::remove(d + ".merged.json");

  // Cut before the first event: nothing to read is an error naming the rank and the file, the other rank loads.
  copy_pair("slow-data-rank1", d, [](std::string t) { return t.substr(0, t.find("\"traceEvents\"") + 20); });
  ASSERT_TRUE(load({d}, run, err)) << err;
  ASSERT_EQ(run.ranks.size(), 1u);
  EXPECT_NE(notes_of(run).find("rank 1 not loaded: " + d + "/rank1.pt.trace.json: truncated"), std::string::npos)
      << notes_of(run);
  fs::remove_all(d);
}

// A profiler stopped before its schedule reached an active step writes an empty traceEvents: that rank is named as
// not loaded (with the likely cause), the other rank is analysed; both empty is exit 1's error listing both.
TEST(KinetoRobust, EmptyTraceEventsIsNamedNotAnalysedAsAnIdleRank) {
  const std::string d = temp_dir("empty");
  copy_pair("balanced", d, [&](std::string t) {
    const size_t at = t.find("\"traceEvents\"");
    const size_t end = t.rfind("]");
    return t.substr(0, at) + "\"traceEvents\": []" + t.substr(end + 1);
  });
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load({d}, run, err)) << err;
  ASSERT_EQ(run.ranks.size(), 1u);
  EXPECT_NE(notes_of(run).find("rank 1 not loaded: " + d + "/rank1.pt.trace.json: empty input: no events"),
            std::string::npos)
      << notes_of(run);
  write_text(d + "/rank0.pt.trace.json", R"({"schemaVersion": 1, "traceEvents": []})");
  EXPECT_FALSE(load({d}, run, err));
  EXPECT_NE(err.find("no trace could be read"), std::string::npos) << err;
  EXPECT_NE(err.find("rank0.pt.trace.json: empty"), std::string::npos) << err;
  fs::remove_all(d);
}

// Profiled without prof.step(): no ProfilerStep#N. The steps are then the main thread's iterations, one per forward
// pass; the report says how they were made and how to get PyTorch's own, and the planted slow rank is still named.
TEST(KinetoRobust, NoProfilerStepAnalysesTheMainThreadsIterations) {
  const std::string d = temp_dir("nostep");
  auto strip = [](std::string t) { return std::regex_replace(t, std::regex("ProfilerStep#"), "NotAStep#"); };
  write_text(d + "/rank0.pt.trace.json", strip(read_text(rank_file("slow-data-rank1", 0))));
  write_text(d + "/rank1.pt.trace.json", strip(read_text(rank_file("slow-data-rank1", 1))));
  RunTrace with_steps, run;
  std::string err;
  ASSERT_TRUE(load({rank_file("slow-data-rank1", 0), rank_file("slow-data-rank1", 1)}, with_steps, err)) << err;
  ASSERT_TRUE(load({d}, run, err)) << err;
  const std::string notes = notes_of(run);
  EXPECT_NE(notes.find("no ProfilerStep#N annotations (profiled without prof.step())"), std::string::npos) << notes;
  EXPECT_NE(notes.find("call prof.step()"), std::string::npos) << notes;
  // As many iterations as PyTorch's steps, give or take the partial ones at the trace's edges.
  const size_t derived = steps_of(run.ranks[0]).size(), real = steps_of(with_steps.ranks[0]).size();
  EXPECT_GE(derived + 1, real);
  EXPECT_LE(derived, real + 2);
  const Analysis a = analyze(run);
  ASSERT_FALSE(a.causes.empty()) << analysis_text(a);
  EXPECT_EQ(a.causes.front().rank, 1) << analysis_text(a);
  EXPECT_EQ(a.causes.front().stage, "wait_data") << analysis_text(a);
  fs::remove_all(d);
}

// Durations of 0 and below: a negative one is read as 0 long and counted in a note; zero-length steps do not divide
// anything by zero (the summary and the analysis stay finite).
TEST(KinetoRobust, ZeroAndNegativeDurationsAreNotedNotTrusted) {
  const std::string d = temp_dir("dur");
  int changed = 0;
  copy_pair("balanced", d, [&](std::string t) {
    // Every DataLoader span of rank 1 gets a negative duration, every ProfilerStep a zero one.
    std::string out;
    std::istringstream in(t);
    std::string line;
    bool data = false, step = false;
    while (std::getline(in, line)) {
      if (line.find("\"name\": \"enumerate(DataLoader)") != std::string::npos) data = true;
      if (line.find("\"name\": \"ProfilerStep#") != std::string::npos) step = true;
      const size_t at = line.find("\"dur\": ");
      if (at != std::string::npos && (data || step)) {
        const size_t end = line.find_first_of(",}", at);
        line = line.substr(0, at) + (data ? "\"dur\": -5.5" : "\"dur\": 0") + line.substr(end);
        changed += data;
        data = step = false;
      }
      out += line + "\n";
    }
    return out;
  });
  ASSERT_GT(changed, 3);
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load({d}, run, err)) << err;
  const std::string notes = notes_of(run);
  EXPECT_NE(notes.find("rank 1: " + std::to_string(changed) + " stage spans with a negative dur read as 0 long"),
            std::string::npos)
      << notes;
  for (const Event& e : run.ranks[1].events) ASSERT_GE(e.duration(), 0);
  const nlohmann::json s = summary_json(summarize(run));
  const nlohmann::json a = analysis_json(analyze(run));
  EXPECT_EQ(s.dump().find("nan"), std::string::npos);
  EXPECT_EQ(a.dump().find("nan"), std::string::npos);
  EXPECT_EQ(a.dump().find("inf"), std::string::npos);
  fs::remove_all(d);
}

// One rank profiled by PyTorch 1.x's autograd profiler (a bare array, no distributedInfo, the rank in its file
// name) and one by 2.11's Kineto: read as one run, the report names which rank has which format.
TEST(KinetoRobust, RanksOfDifferentPyTorchVersionsAreReadAndSaidToDiffer) {
  const std::string d = temp_dir("mixed");
  write_text(d + "/rank0.pt.trace.json", read_text(rank_file("balanced", 0)));
  nlohmann::json r1 = nlohmann::json::parse(read_text(rank_file("balanced", 1)));
  const int64_t base_us = r1["baseTimeNanoseconds"].get<int64_t>() / 1000;
  for (auto& e : r1["traceEvents"])  // the legacy format's times are absolute microseconds
    if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + static_cast<double>(base_us);
  write_text(d + "/legacy_rank_1.json", r1["traceEvents"].dump());
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load({d}, run, err)) << err;
  ASSERT_EQ(run.ranks.size(), 2u);
  const std::string notes = notes_of(run);
  EXPECT_NE(notes.find("different PyTorch profilers (rank 0: kineto schema 1; rank 1: legacy array)"),
            std::string::npos)
      << notes;
  EXPECT_FALSE(analyze(run).ranks.empty());
  fs::remove_all(d);
}

}  // namespace
