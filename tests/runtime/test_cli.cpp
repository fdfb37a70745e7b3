#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/launch/cli/cli.h"

namespace {
ddp::ParseResult parse(std::vector<const char*> args) {
  args.insert(args.begin(), "ddp_profile");
  return ddp::parse_command_line(static_cast<int>(args.size()), args.data());
}

TEST(Cli, DefaultsAreTheSeedJob) {
  auto r = parse({"--record"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.cmd.mode, ddp::Mode::record);
  const auto& j = r.cmd.job;
  EXPECT_EQ(j.dataset_size, 10000);
  EXPECT_EQ(j.features, 128);
  EXPECT_EQ(j.hidden, 512);
  EXPECT_EQ(j.batch_size, 64);
  EXPECT_EQ(j.epochs, 2);
  EXPECT_EQ(j.workers, 2);
  EXPECT_EQ(j.nproc, 2);
  EXPECT_DOUBLE_EQ(j.lr, 1e-3);
  EXPECT_DOUBLE_EQ(j.bucket_mb, 25.0);
  EXPECT_TRUE(j.pinned);
  EXPECT_TRUE(j.record);
}

TEST(Cli, OfflineModesTakeSeveralTracesAndMaps) {
  auto r = parse({"--analyze", "a.json", "b.json.gz", "--json", "--map", "^my_step$=optimizer", "--map", "x=forward"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.cmd.mode, ddp::Mode::analyze);
  EXPECT_EQ(r.cmd.inputs, (std::vector<std::string>{"a.json", "b.json.gz"}));
  EXPECT_EQ(r.cmd.input_dir, "a.json");
  EXPECT_TRUE(r.cmd.json);
  EXPECT_EQ(r.cmd.maps.size(), 2u);
  r = parse({"--digest", "node0/", "a.json", "-o", "digests", "--map", "x=forward"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.cmd.mode, ddp::Mode::digest);
  EXPECT_EQ(r.cmd.inputs, (std::vector<std::string>{"node0/", "a.json"}));
  EXPECT_EQ(r.cmd.output_file, "digests");
  EXPECT_NE(parse({"--digest", "-o", "digests"}).message.find("give them first"), std::string::npos);
  r = parse({"--summary", "run_dir"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.cmd.input_dir, "run_dir") << "one run folder, as before";
  for (auto args : std::vector<std::vector<const char*>>{{"--analyze", "d", "--map", "([=forward"},
                                                         {"--analyze", "d", "--map", "x=no_such_stage"},
                                                         {"--analyze", "d", "--map", "no_equals"},
                                                         {"--record", "--map", "x=forward"}}) {
    auto bad = parse(args);
    EXPECT_EQ(bad.exit_code, 2) << args.back();
    EXPECT_NE(bad.message.find("--map"), std::string::npos) << bad.message;
  }
}

TEST(Cli, WhatIfTakesItsEditsThenTheRun) {
  auto r = parse({"--what-if", "workers=4,prefetch=3", "run_dir", "--json", "--steps", "2-9"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.cmd.mode, ddp::Mode::what_if);
  EXPECT_EQ(r.cmd.what_if, "workers=4,prefetch=3");
  EXPECT_EQ(r.cmd.inputs, (std::vector<std::string>{"run_dir"}));
  EXPECT_EQ(r.cmd.input_dir, "run_dir");
  EXPECT_TRUE(r.cmd.json);
  for (auto args : std::vector<std::vector<const char*>>{{"--what-if", "workers=4"},
                                                         {"--what-if", "workers=lots", "run_dir"},
                                                         {"--what-if", "rank0.wait_comm=median", "run_dir"}}) {
    auto bad = parse(args);
    EXPECT_EQ(bad.exit_code, 2) << args[1];
    EXPECT_NE(bad.message.find("--what-if"), std::string::npos) << bad.message;
  }
}

// The edits are parsed once, here, into the command the trace command runs; --help lists every form they take.
TEST(Cli, WhatIfsEditsAreParsedOnceAndTheHelpListsEveryForm) {
  auto r = parse({"--what-if", "workers=4,rank1.forward=median", "run_dir"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  ASSERT_EQ(r.cmd.what_if_edits.size(), 2u);
  EXPECT_EQ(r.cmd.what_if_edits[0].edit.kind, ddp::ReplayEdit::Kind::workers);
  EXPECT_DOUBLE_EQ(r.cmd.what_if_edits[0].edit.value, 4);
  EXPECT_EQ(r.cmd.what_if_edits[1].edit.stage, ddp::Stage::forward);
  EXPECT_EQ(r.cmd.what_if_edits[1].text, "rank1.forward=median");
  auto bad = parse({"--what-if", "rank1.worker_start=median", "run_dir"});  // it would change nothing
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.message.find("editable: "), std::string::npos) << bad.message;
  const std::string help = parse({"--help"}).message;
  for (const char* form : {"accum=K", "ranks=N", "nodes=M", "bucket_cap_mb=X"})
    EXPECT_NE(help.find(form), std::string::npos) << form;
}

TEST(Cli, JobOptionsAndSpecs) {
  auto r = parse({"--record", "--accum-steps", "4", "--slow", "rank=1,stage=transform,ms=5", "--slow",
                  "rank=0,stage=backward,ms=1.5", "--inject-fault", "rank=1,step=3,kind=kill", "--no-record",
                  "--checkpoint-steps", "0,5,10", "--out", "x", "--out", "y"});
  ASSERT_LT(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.cmd.job.accum_steps, 4);
  ASSERT_EQ(r.cmd.job.slow.size(), 2u);
  EXPECT_EQ(r.cmd.job.slow[0].rank, 1);
  EXPECT_EQ(r.cmd.job.slow[0].stage, ddp::Stage::transform);
  EXPECT_DOUBLE_EQ(r.cmd.job.slow[1].ms, 1.5);
  EXPECT_EQ(r.cmd.job.fault.kind, "kill");
  EXPECT_FALSE(r.cmd.job.record);
  EXPECT_EQ(r.cmd.job.checkpoint_steps, (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(r.cmd.out_dir, "y") << "the last --out wins (the supervisor appends its own)";
}

TEST(Cli, UsageErrorsExitTwoWithAReason) {
  for (auto args : std::vector<std::vector<const char*>>{
           {},
           {"--record", "--summary", "d"},
           {"--record", "--batch-size", "0"},
           {"--record", "--batch-size", "many"},
           {"--record", "--slow", "rank=1,stage=nope,ms=1"},
           {"--record", "--slow", "rank=5,stage=forward,ms=1"},
           {"--record", "--inject-fault", "rank=0,step=1,kind=explode"},
           {"--record", "--checkpoint-steps", "1,x"},
           {"--summary", "d", "--epochs", "3"},
           {"--record", "--bogus"},
           {"--diff", "onlyone"},
           {"--digest", "-o", "dir"},
           {"--analyze", "--json"},
           {"--digest", "traces"},
       }) {
    auto r = parse(args);
    EXPECT_EQ(r.exit_code, 2) << (args.empty() ? "(none)" : args.back());
    EXPECT_FALSE(r.message.empty());
  }
}

// --version says the version the wheel and the companion carry (python/ddp_profile/version.py), read here from
// that file as pip and the wheel's metadata read it.
TEST(Cli, VersionIsTheWheelsAndExitsZero) {
  std::ifstream f(std::string(DDP_SOURCE_DIR) + "/python/ddp_profile/version.py");
  std::stringstream text;
  text << f.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  ASSERT_TRUE(std::regex_search(s, m, std::regex("__version__ = \"([^\"]+)\"")));
  auto r = parse({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.message, "ddp_profile " + m[1].str());
  r = parse({"--version", "--summary", "run"});  // before anything else, as --help
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.message, "ddp_profile " + m[1].str());
}

TEST(Cli, HelpExitsZero) {
  auto r = parse({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.message.find("--record"), std::string::npos);
  EXPECT_NE(r.message.find("--accum-steps"), std::string::npos);
}
}  // namespace
