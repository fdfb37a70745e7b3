// The real binary: `--export RUN --format kineto -o DIR` on a run it recorded writes per-rank PyTorch profiler
// traces that its own Kineto reader analyses to the same verdict; bad combinations are usage errors (exit 2) that
// write nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;
using ddptest::fresh_dir;
using ddptest::kExe;

// One short run with a planted cause (rank 1 sleeps 20 ms in forward), recorded once for every test here. At 5 ms the
// verdict held on a quiet machine only: with a core busy elsewhere Gloo's threads wait for it, and the collective's
// own exposed transfer (6.7 ms/step, measured so) came out ahead of the planted stage.
const std::string& slow_forward_run() {
  static const std::string dir = [] {
    const std::string d = fresh_dir("kineto_export_run");
    auto r = ddptest::run({kExe, "--record", "--out", d, "--max-steps", "20", "--slow", "rank=1,stage=forward,ms=20"},
                          d + ".log", 300);
    EXPECT_EQ(r.code, 0) << r.output;
    return d;
  }();
  return dir;
}

ddptest::Result cli(const std::string& name, std::vector<std::string> args) {
  args.insert(args.begin(), kExe);
  return ddptest::run(args, fresh_dir(name) + ".log", 120);
}

nlohmann::json analysis_of(const std::string& name, const std::string& input) {
  auto r = cli(name, {"--analyze", input, "--json"});
  EXPECT_EQ(r.code, 0) << r.output;
  return ddptest::printed_json(r.output);
}

}  // namespace

TEST(KinetoExportCli, OurRunAsKinetoTracesGivesTheSameVerdict) {
  const std::string out = fresh_dir("kineto_export_out");
  auto r = cli("kineto_export", {"--export", slow_forward_run(), "--format", "kineto", "-o", out});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + out + "/rank0.pt.trace.json"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(out + "/rank1.pt.trace.json"));

  const nlohmann::json ours = analysis_of("analyze_ours", slow_forward_run());
  const nlohmann::json back = analysis_of("analyze_kineto", out);
  EXPECT_EQ(ours["source"], "ddp_profile");
  EXPECT_EQ(back["source"], "kineto");
  ASSERT_FALSE(back["causes"].empty()) << back.dump(2);
  EXPECT_EQ(back["causes"][0]["rank"], 1) << back["causes"].dump(2);
  EXPECT_EQ(back["causes"][0]["stage"], "forward") << back["causes"].dump(2);
  EXPECT_EQ(back["causes"][0]["rank"], ours["causes"][0]["rank"]);
  EXPECT_EQ(back["causes"][0]["stage"], ours["causes"][0]["stage"]);
  ASSERT_EQ(back["clock_alignment"].size(), 2u);
  EXPECT_GE(back["clock_alignment"][1]["collectives"].get<int>(), 19);

  // Exporting again into the same folder replaces our own files.
  r = cli("kineto_export_again", {"--export", slow_forward_run(), "--format", "kineto", "-o", out});
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(KinetoExportCli, BadCombinationsAreUsageErrorsThatWriteNothing) {
  const std::string run = slow_forward_run();
  const std::string out = fresh_dir("kineto_bad_out");
  auto no_o = cli("no_o", {"--export", run, "--format", "kineto"});
  EXPECT_EQ(no_o.code, 2);
  EXPECT_NE(no_o.output.find("needs -o DIR"), std::string::npos) << no_o.output;
  EXPECT_EQ(cli("bad_format", {"--export", run, "--format", "systrace", "-o", out}).code, 2);
  auto not_export = cli("format_summary", {"--summary", run, "--format", "kineto"});
  EXPECT_EQ(not_export.code, 2);
  EXPECT_NE(not_export.output.find("--format only applies to --export"), std::string::npos) << not_export.output;
  auto with_map = cli("format_map", {"--export", run, "--format", "kineto", "-o", out, "--map", "x=forward"});
  EXPECT_EQ(with_map.code, 2) << with_map.output;
  // Kineto traces in are already Kineto traces: --format kineto takes one of our runs.
  const std::string kineto_in = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-2.11-cpu/balanced";
  auto traces_in = cli("format_traces", {"--export", kineto_in, "--format", "kineto", "-o", out});
  EXPECT_EQ(traces_in.code, 2);
  EXPECT_NE(traces_in.output.find("exports one of our run folders"), std::string::npos) << traces_in.output;
  EXPECT_FALSE(fs::exists(out)) << "a usage error writes nothing";

  // A folder that already holds another job's trace: HTA would read both jobs as one, so nothing is written.
  fs::create_directories(out);
  std::ofstream(out + "/worker0.123.pt.trace.json") << "{}";
  auto mixed = cli("format_mixed", {"--export", run, "--format", "kineto", "-o", out});
  EXPECT_EQ(mixed.code, 2);
  EXPECT_NE(mixed.output.find("worker0.123.pt.trace.json"), std::string::npos) << mixed.output;
  EXPECT_FALSE(fs::exists(out + "/rank0.pt.trace.json"));

  EXPECT_EQ(cli("format_missing", {"--export", out + "/no_such_run", "--format", "kineto", "-o", out + "/k"}).code, 1);
}

// --export --format perfetto from the command line: our run by default into DIR/trace.pftrace, users' traces into
// -o FILE, many ranks as a tar with a manifest; a foreign extension is not taken for a tar, a missing -o for users'
// traces is a usage error. (The protobuf itself is decoded in tests/traces/perfetto.)
TEST(PerfettoExportCli, OurRunUsersTracesAndATarOfRanks) {
  const std::string& run = slow_forward_run();
  auto ours = cli("perfetto_ours", {"--export", run, "--format", "perfetto"});
  ASSERT_EQ(ours.code, 0) << ours.output;
  EXPECT_GT(fs::file_size(run + "/trace.pftrace"), 1000u) << ours.output;
  EXPECT_NE(ours.output.find("from 2 rank(s)"), std::string::npos) << ours.output;

  const std::string traces = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/pytorch-2.11-cpu/slow-data-rank1";
  const std::string d = fresh_dir("perfetto_users");
  fs::create_directories(d);
  auto tar = cli("perfetto_tar", {"--export", traces, "--format", "perfetto", "-o", d + "/ranks.tar"});
  ASSERT_EQ(tar.code, 0) << tar.output;
  EXPECT_NE(tar.output.find("perfetto_manifest.json"), std::string::npos) << tar.output;
  auto list = ddptest::run({"/bin/tar", "-tf", d + "/ranks.tar"}, d + ".tar.log", 30);
  ASSERT_EQ(list.code, 0) << list.output;
  EXPECT_NE(list.output.find("perfetto_manifest.json"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("rank1"), std::string::npos) << list.output;

  auto no_o = cli("perfetto_no_o", {"--export", traces, "--format", "perfetto"});
  EXPECT_EQ(no_o.code, 2) << no_o.output;
  EXPECT_FALSE(fs::exists(traces + "/trace.pftrace"));
}
