// The report at scale (#34): at 1024 ranks it fits a screen and says what is wrong — causes grouped by stage with
// compact rank sets, victims summarised, a straggler table — and one slow rank among many is the top cause.
#include <sstream>

#include "tests/traces/analysis/analysis_sim.h"
#include "traces/base/rank_set.h"

using namespace analysis_test;

TEST(RankSet, SaysASetInAFewWords) {
  EXPECT_EQ(ddp::describe_ranks({777}), "rank 777");
  EXPECT_EQ(ddp::describe_ranks({11, 4, 5, 6, 7, 8, 9, 10, 4}), "ranks 4-11 (8 ranks)");
  std::vector<int> every4;
  for (int r = 2; r < 1024; r += 4) every4.push_back(r);
  EXPECT_EQ(ddp::describe_ranks(every4, 1024), "ranks 2, 6, 10, ... 1022 (256 ranks, every 4th)");
  EXPECT_EQ(ddp::describe_ranks({3, 9, 40}), "ranks 3, 9, 40");
  EXPECT_EQ(ddp::describe_ranks({1, 2, 3, 5, 8, 13, 21, 34}), "ranks 1, 2, 3, ... 34 (8 ranks)");
  std::vector<int> all(64);
  for (int r = 0; r < 64; ++r) all[r] = r;
  EXPECT_EQ(ddp::describe_ranks(all, 64), "all 64 ranks");
  all.erase(all.begin() + 17);
  EXPECT_EQ(ddp::describe_ranks(all, 64), "all 64 ranks but rank 17");
  EXPECT_EQ(ddp::clip("abcdef", 5), "ab...");
}

namespace {
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// 1024 ranks: one slow backward (rank 777) and every 4th rank starved of data, each a cause of its own, as
// attribution finds them; every rank a victim; a flag on 64 ranks; 20 problems.
ddp::Analysis at_1024_ranks() {
  ddp::Analysis a;
  a.world = 1024;
  a.steps = 20;
  a.step_ms = 13;
  a.verdict = "stragglers: rank 777's backward";
  auto cause = [&](int rank, const char* stage, double lost) {
    ddp::StallCause c;
    c.rank = rank;
    c.stage = stage;
    c.lost_ms = lost;
    c.lost_ms_per_step = lost / 20;
    c.share = c.lost_ms_per_step / 13;
    c.explanation = "rank " + std::to_string(rank) + " spends longer in " + stage + " than the others, " +
                    std::string(400, 'x');  // an explanation longer than a line
    for (int v = 0; v < 1024; ++v)
      if (v != rank) c.victims.push_back({v, "wait_comm", lost * (v % 7 + 1) / 7});
    a.causes.push_back(c);
  };
  cause(777, "backward", 400);
  for (int r = 2; r < 1024; r += 4) cause(r, "wait_data", 10 + r % 5);
  for (int r = 0; r < 1024; ++r) {
    ddp::RankAnalysis ra;
    ra.rank = r;
    ra.steps = 20;
    ra.step_ms = 13;
    ra.wait_comm_ms = r == 777 ? 0.1 : 8;
    ra.wait_data_ms = r % 4 == 2 ? 1 : 0;
    if (r == 777) ra.step_ms = 33;
    a.ranks.push_back(ra);
    if (r < 64) a.flags.push_back({"tiny_buckets", r, "rank " + std::to_string(r) + ": buckets of 1 MB", {}});
  }
  for (int i = 0; i < 20; ++i) a.problems.push_back("rank " + std::to_string(i) + ": trace cut off");
  return a;
}
}  // namespace

TEST(AnalysisAtScale, TheReportOf1024RanksFitsAScreenAndGroupsWhatIsWrong) {
  const std::string text = ddp::analysis_text(at_1024_ranks());
  const auto lines = lines_of(text);
  EXPECT_LE(lines.size(), 80u) << text;
  for (const auto& l : lines) EXPECT_LE(l.size(), ddp::kReportLineMax) << l;
  EXPECT_NE(text.find("  1. rank 777 backward: 400.00 ms lost"), std::string::npos) << text;
  EXPECT_NE(text.find("  2. ranks 2, 6, 10, ... 1022 (256 ranks, every 4th) wait_data"), std::string::npos) << text;
  EXPECT_NE(text.find("victims: all 1024 ranks but rank 777 waited (wait_comm): median"), std::string::npos) << text;
  EXPECT_NE(text.find("[tiny_buckets] ranks 0-63 (64 ranks)"), std::string::npos) << text;
  EXPECT_NE(text.find("stragglers"), std::string::npos) << text;
  EXPECT_NE(text.find("    rank 777 "), std::string::npos) << text;
  EXPECT_NE(text.find("... 14 more (--json)"), std::string::npos) << text;
  // The JSON keeps every rank and every cause.
  const nlohmann::json j = ddp::analysis_json(at_1024_ranks());
  EXPECT_EQ(j["ranks"].size(), 1024u);
  EXPECT_EQ(j["causes"].size(), 257u);
}

TEST(AnalysisAtScale, OneSlowRankAmong32IsTheTopCauseAndTheWorstStraggler) {
  Sim sim;
  sim.world = 32;
  sim.steps = 8;
  sim.rank.assign(32, RankKnobs{});
  sim.rank[13].backward += 20;
  ddp::Analysis a = run_analysis(sim, "needle32");
  ASSERT_FALSE(a.causes.empty()) << describe(a);
  EXPECT_EQ(a.causes.front().rank, 13) << describe(a);
  const std::string text = describe(a);
  EXPECT_NE(text.find("  1. rank 13 backward"), std::string::npos) << text;
  const size_t table = text.find("stragglers");
  ASSERT_NE(table, std::string::npos) << text;
  EXPECT_EQ(text.find("    rank ", table), text.find("    rank 13 ", table)) << text;
  EXPECT_LE(lines_of(text).size(), 80u) << text;
}
