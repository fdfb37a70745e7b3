// The real binary on real per-rank PyTorch profiler traces (tests/data/kineto/pytorch-2.11-cpu, see
// tests/data/README.md): --analyze, --summary and --export take a folder of traces or the files themselves, with the
// same exit codes as for our own runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "integration_support.h"
#include "kineto_cli_support.h"
#include "traces/chrome/chrome_reader.h"

namespace {
namespace fs = std::filesystem;
using ddptest::analyze_json;
using ddptest::fresh_dir;
using ddptest::run_cli;

const std::string kCpu = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-2.11-cpu";

std::vector<std::string> files_of(const std::string& scenario) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kCpu + "/" + scenario)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(KinetoCli, AnalyzeNamesEachPlantedRankAndStage) {
  struct Case {
    const char* scenario;
    int rank;
    const char* stage;
    std::vector<std::string> extra;
  };
  for (const Case& c : {Case{"slow-data-rank1", 1, "wait_data", {}}, Case{"slow-forward-rank0", 0, "forward", {}},
                        Case{"slow-optimizer-rank1", 1, "optimizer", {"--map", "^slow_optimizer_sleep$=optimizer"}}}) {
    auto j = analyze_json(c.scenario, {kCpu + "/" + c.scenario}, c.extra);
    EXPECT_EQ(j["source"], "kineto");
    EXPECT_EQ(j["schema"], "ddp_profile.analysis/1");
    ddptest::expect_top_cause(j, c.rank, c.stage, c.scenario);
    ASSERT_EQ(j["clock_alignment"].size(), 2u);
    EXPECT_GE(j["clock_alignment"][1]["collectives"].get<int>(), 25);
    EXPECT_FALSE(j["notes"].empty()) << "what a Kineto trace cannot show is said";
  }
}

TEST(KinetoCli, BalancedRunBlamesNoRanksStageAndFilesWorkLikeTheFolder) {
  auto folder = analyze_json("balanced_dir", {kCpu + "/balanced"});
  auto files = analyze_json("balanced_files", files_of("balanced"));
  ddptest::expect_no_rank_blamed(folder, 0.1, "balanced");
  EXPECT_EQ(folder["verdict"], files["verdict"]);
  EXPECT_EQ(folder["ranks"], files["ranks"]);
}

TEST(KinetoCli, TextReportsTheClockOffsetsAndNotes) {
  auto r = run_cli("text", {"--analyze", kCpu + "/slow-forward-rank0"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("verdict: dominant stall: rank 0 forward"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" from 30 collectives"), std::string::npos) << r.output;
  auto s = run_cli("summary", {"--summary", kCpu + "/slow-forward-rank0", "--json"});
  EXPECT_EQ(s.code, 0) << s.output;
  auto j = ddptest::printed_json(s.output);
  EXPECT_EQ(j["source"], "kineto");
  EXPECT_EQ(j["ranks"].size(), 2u);
}

TEST(KinetoCli, ExportWritesOneAlignedTraceOurReaderReads) {
  const std::string out = fresh_dir("export") + ".merged.json";
  auto r = run_cli("export", {"--export", kCpu + "/balanced", "-o", out});
  ASSERT_EQ(r.code, 0) << r.output;
  ddp::ChromeTrace t = ddp::read_chrome_file(out);
  ASSERT_TRUE(t.ok()) << t.status.message;
  std::set<std::string> processes, threads;
  size_t spans = 0;
  for (const auto& e : t.events) {
    if (e.ph == 'M' && e.name == "process_name") processes.insert(*e.arg("name"));
    if (e.ph == 'M' && e.name == "thread_name") threads.insert(*e.arg("name"));
    spans += e.ph == 'X';
  }
  // Each rank's stage spans, and each rank's own trace processes beside them.
  for (const char* p : {"rank 0 (rank0)", "rank 1 (rank1)", "rank 0 · python3", "rank 1 · python3"})
    EXPECT_TRUE(processes.count(p)) << p;
  EXPECT_TRUE(std::any_of(threads.begin(), threads.end(),
                          [](const std::string& n) { return n.find("pt_gloo_runloop") != std::string::npos; }));
  EXPECT_GT(spans, 500u);
  EXPECT_EQ(t.info.top["otherData"]["manifest"]["kineto"]["clock_alignment"].size(), 2u);
}

TEST(KinetoCli, BadInputExitsWithTheDocumentedCodes) {
  // A Kineto export needs -o (it must not write into the user's trace folder): usage.
  EXPECT_EQ(run_cli("no_o", {"--export", kCpu + "/balanced"}).code, 2);
  auto bad_map = run_cli("bad_map", {"--analyze", kCpu + "/balanced", "--map", "([=forward"});
  EXPECT_EQ(bad_map.code, 2);
  EXPECT_NE(bad_map.output.find("([="), std::string::npos) << bad_map.output;
  auto bad_stage = run_cli("bad_stage", {"--analyze", kCpu + "/balanced", "--map", "x=fwd"});
  EXPECT_EQ(bad_stage.code, 2);
  EXPECT_NE(bad_stage.output.find("fwd"), std::string::npos) << bad_stage.output;

  // A damaged rank: the other loads, the warning names the file and the missing rank.
  const std::string d = fresh_dir("damaged");
  fs::create_directories(d);
  const auto files = files_of("balanced");
  fs::copy_file(files[0], d + "/rank0.pt.trace.json.gz");
  std::ofstream(d + "/rank1.pt.trace.json") << "{\"traceEvents\": [ {\"ph\": \"X\", ";
  auto r = run_cli("damaged_run", {"--analyze", d});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rank1.pt.trace.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 missing"), std::string::npos) << r.output;
  // Nothing readable: exit 1 naming the file.
  r = run_cli("damaged_only", {"--summary", d + "/rank1.pt.trace.json"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("rank1.pt.trace.json"), std::string::npos) << r.output;
  // Two files for one rank: exit 1 naming both.
  r = run_cli("same_rank", {"--analyze", files[0], d + "/rank0.pt.trace.json.gz"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(files[0]), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(d + "/rank0.pt.trace.json.gz"), std::string::npos) << r.output;
}

// Analysis where the traces are (docs/kineto.md, Digests): each "node" digests its own rank's trace into one folder
// (with the --map rule the traces need), and --analyze of that folder says what --analyze of the traces says.
TEST(KinetoCli, DigestsMadeOnePerNodeAnalyseAsTheTracesDo) {
  const std::string scenario = "slow-optimizer-rank1";
  const std::vector<std::string> map = {"--map", "^slow_optimizer_sleep$=optimizer"};
  const std::string d = fresh_dir("digests");
  for (const std::string& f : files_of(scenario)) {
    std::vector<std::string> args = {"--digest", f, "-o", d};
    args.insert(args.end(), map.begin(), map.end());
    auto r = run_cli("digest_call", args);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("digested 1 trace(s)"), std::string::npos) << r.output;
  }
  auto raw = analyze_json("digest_raw", {kCpu + "/" + scenario}, map);
  auto dig = analyze_json("digest_dig", {d});
  ddptest::expect_top_cause(dig, 1, "optimizer", "from digests");
  EXPECT_EQ(raw["verdict"], dig["verdict"]);
  EXPECT_EQ(raw["causes"], dig["causes"]);
  EXPECT_EQ(raw["ranks"], dig["ranks"]);
  EXPECT_EQ(raw["flags"], dig["flags"]);
  EXPECT_EQ(raw["clock_alignment"], dig["clock_alignment"]);

  // What a digest cannot do, or a command line that cannot mean anything, is said with the usage exit code.
  EXPECT_EQ(run_cli("digest_no_o", {"--digest", kCpu + "/balanced"}).code, 2);
  auto exp = run_cli("digest_export", {"--export", d, "-o", d + ".json"});
  EXPECT_EQ(exp.code, 2) << exp.output;
  EXPECT_NE(exp.output.find("not digests"), std::string::npos) << exp.output;
  auto late_map = run_cli("digest_late_map", {"--analyze", d, "--map", "x=forward"});
  EXPECT_EQ(late_map.code, 2) << late_map.output;
  EXPECT_NE(late_map.output.find("give it to --digest"), std::string::npos) << late_map.output;
}
