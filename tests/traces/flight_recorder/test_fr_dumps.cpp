// Flight Recorder dumps written by torch 2.11's own recorder (tests/data/flight_recorder, README there): read from
// its pickle and its JSON alike, matched across ranks, and each planted fault named where it is — a rank that never
// joined (2 and 64 ranks), a skipped collective, a size and a dtype mismatch — with a healthy job passing as one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "traces/base/rank_set.h"
#include "traces/flight_recorder/fr_match.h"
#include "traces/flight_recorder/fr_report.h"
#include "traces/timeline/timeline.h"

namespace {
namespace fs = std::filesystem;

const std::string kData = std::string(DDP_SOURCE_DIR) + "/tests/data/flight_recorder/";

// One scenario's dumps of one format (the folder holds both: torch's JSON and pickle of one moment).
std::vector<ddp::FrDump> dumps(const std::string& scenario, const std::string& ext = ".pkl") {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kData + scenario))
    if (e.path().extension() == ext) files.push_back(e.path().string());
  std::vector<ddp::FrDump> out;
  std::string err;
  EXPECT_TRUE(ddp::read_fr_dumps(files, out, err)) << err;
  return out;
}

const ddp::FrGroupVerdict& group(const ddp::FrVerdict& v, const std::string& id) {
  static const ddp::FrGroupVerdict none;
  for (const auto& g : v.groups)
    if (g.id == id) return g;
  ADD_FAILURE() << "no group " << id;
  return none;
}

TEST(FlightRecorder, PickleAndJsonOfOneMomentReadTheSame) {
  for (const char* s : {"healthy", "stuck_rank", "long_memo", "second_group"}) {
    const auto p = dumps(s, ".pkl"), j = dumps(s, ".json");
    ASSERT_EQ(p.size(), j.size()) << s;
    for (size_t r = 0; r < p.size(); ++r) {
      ASSERT_EQ(p[r].entries.size(), j[r].entries.size()) << s << " rank " << r;
      for (size_t k = 0; k < p[r].entries.size(); ++k) {
        const ddp::FrEntry &a = p[r].entries[k], &b = j[r].entries[k];
        EXPECT_EQ(ddp::describe_fr_entry(a), ddp::describe_fr_entry(b)) << s;
        EXPECT_EQ(a.group, b.group);
        EXPECT_EQ(a.retired, b.retired);
        EXPECT_EQ(a.created_ns, b.created_ns);
      }
    }
  }
  // The pickle keeps the stack: the frame outside torch that enqueued each collective.
  const auto h = dumps("healthy");
  EXPECT_NE(h[0].entries.back().frame.find("make_dumps.py:"), std::string::npos) << h[0].entries.back().frame;
  // long_memo's dump needs LONG_BINPUT/LONG_BINGET and containers fetched from the memo (frames named twice).
  EXPECT_EQ(dumps("long_memo")[0].entries.size(), 115u);
}

TEST(FlightRecorder, AHealthyJobAgrees) {
  const ddp::FrVerdict v = ddp::match_fr_dumps(dumps("healthy"));
  EXPECT_TRUE(v.consistent) << v.headline;
  const auto& g = group(v, "0");
  EXPECT_EQ(g.desc, "default_pg");
  EXPECT_EQ(g.members, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.compared, 20);
  EXPECT_EQ(g.parted_seq, -1);
  EXPECT_TRUE(g.mismatches.empty());
  EXPECT_NE(v.headline.find("agree"), std::string::npos) << v.headline;
}

TEST(FlightRecorder, TheRankThatNeverJoinedIsNamedWithItsLastCollective) {
  for (const char* ext : {".pkl", ".json"}) {
    const ddp::FrVerdict v = ddp::match_fr_dumps(dumps("stuck_rank", ext));
    EXPECT_FALSE(v.consistent);
    const auto& g = group(v, "0");
    EXPECT_EQ(g.parted_seq, 19);
    EXPECT_EQ(g.parted.entry.op, "all_reduce");
    EXPECT_EQ(g.parted.ranks, std::vector<int>{0});
    EXPECT_EQ(g.never_joined, std::vector<int>{1});
    EXPECT_EQ(v.headline.rfind("the ranks part at all_reduce #19 [4096] Float of group 0 (default_pg): rank 1 never "
                               "joined it (its last: barrier #18",
                               0),
              0u)
        << v.headline;
    EXPECT_EQ(g.last[0].done, ddp::FrDone::no);  // rank 0 still waits in #19
  }
}

TEST(FlightRecorder, OneRankAmongSixtyFourThatNeverJoinedFitsAScreen) {
  const auto d = dumps("stuck_64");
  ASSERT_EQ(d.size(), 64u);
  const ddp::FrVerdict v = ddp::match_fr_dumps(d);
  const auto& g = group(v, "0");
  EXPECT_EQ(g.parted_seq, 11);
  EXPECT_EQ(g.never_joined, std::vector<int>{37});
  EXPECT_EQ(g.parted.ranks.size(), 63u);
  const std::string text = ddp::fr_report_text(v, d);
  EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 20) << text;
  EXPECT_NE(text.find("all 64 ranks but rank 37: all_reduce #11 [1024] Float, pending"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 37: barrier #10"), std::string::npos) << text;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    EXPECT_LE(nl - start, 2 * ddp::kReportLineMax + 9);  // the verdict line may run to two report lines
  // The JSON keeps every rank.
  EXPECT_EQ(ddp::fr_report_json(v, d)["groups"][0]["last"].size(), 64u);
}

TEST(FlightRecorder, ASkippedCollectiveIsTheFirstDisagreementAndLeadsTheVerdict) {
  const ddp::FrVerdict v = ddp::match_fr_dumps(dumps("skipped_collective"));
  const auto& g = group(v, "0");
  ASSERT_FALSE(g.mismatches.empty());
  const ddp::FrMismatch& m = g.mismatches.front();
  EXPECT_EQ(m.seq, 8);
  ASSERT_EQ(m.variants.size(), 2u);
  EXPECT_EQ(m.variants[0].ranks, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(m.variants[1].ranks, std::vector<int>{2});
  EXPECT_EQ(v.headline.rfind("at #8 of group 0 (default_pg) the ranks disagree on the sizes", 0), 0u) << v.headline;
  EXPECT_NE(v.headline.find("ranks 0, 1, 3 still wait in it"), std::string::npos) << v.headline;
}

TEST(FlightRecorder, SizeAndDtypeMismatchesAreNamed) {
  const ddp::FrVerdict s = ddp::match_fr_dumps(dumps("size_mismatch"));
  ASSERT_FALSE(group(s, "0").mismatches.empty());
  EXPECT_EQ(group(s, "0").mismatches[0].kind, ddp::FrMismatchKind::sizes);
  EXPECT_EQ(group(s, "0").mismatches[0].seq, 7);
  EXPECT_NE(s.headline.find("[2048]"), std::string::npos) << s.headline;
  const ddp::FrVerdict d = ddp::match_fr_dumps(dumps("dtype_mismatch"));
  ASSERT_FALSE(group(d, "0").mismatches.empty());
  EXPECT_EQ(group(d, "0").mismatches[0].kind, ddp::FrMismatchKind::dtypes);
  EXPECT_NE(d.headline.find("Double"), std::string::npos) << d.headline;
}

TEST(FlightRecorder, SubgroupsAreMatchedAmongTheirOwnMembers) {
  const ddp::FrVerdict v = ddp::match_fr_dumps(dumps("second_group"));
  EXPECT_TRUE(v.consistent) << v.headline;
  ASSERT_EQ(v.groups.size(), 3u);
  EXPECT_EQ(group(v, "1").desc, "pair");
  EXPECT_EQ(group(v, "1").members, (std::vector<int>{0, 1}));
  EXPECT_EQ(group(v, "2").members, (std::vector<int>{2, 3}));
}

TEST(FlightRecorder, AWrappedRingBufferIsComparedWhereEveryDumpHoldsIt) {
  const ddp::FrVerdict v = ddp::match_fr_dumps(dumps("wrapped"));
  EXPECT_TRUE(v.consistent) << v.headline;
  EXPECT_EQ(group(v, "0").common_first, 13);
  EXPECT_EQ(group(v, "0").common_last, 20);
}

TEST(FlightRecorder, AMissingDumpAndAFolderWithoutDumpsAreSaid) {
  std::vector<std::string> one = {kData + "stuck_rank/rank0.pkl"};
  std::vector<ddp::FrDump> d;
  std::string err;
  ASSERT_TRUE(ddp::read_fr_dumps(one, d, err)) << err;
  const ddp::FrVerdict v = ddp::match_fr_dumps(d);
  EXPECT_EQ(group(v, "0").without_dump, std::vector<int>{1});
  EXPECT_NE(ddp::fr_report_text(v, d).find("no dump from rank 1"), std::string::npos);
  // Both formats of one rank in one folder: refused, naming both files.
  EXPECT_FALSE(ddp::read_fr_dumps({kData + "stuck_rank"}, d, err));
  EXPECT_NE(err.find("rank 0 has two dumps"), std::string::npos) << err;
  EXPECT_TRUE(ddp::is_fr_input({kData + "stuck_rank"}));
  EXPECT_FALSE(ddp::is_fr_input({std::string(DDP_SOURCE_DIR) + "/tests/data/kineto"}));
}

}  // namespace

// The viewer's reading: one process per rank, a lane per process group, a span per collective named as the report
// names it, the verdict first among the load notes.

namespace {

TEST(FlightRecorder, TheViewerDrawsEachRanksCollectivesWithTheVerdictFirst) {
  ddp::Timeline tl;
  std::string err;
  const std::string dir = kData + "stuck_64";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".pkl") files.push_back(e.path().string());
  ASSERT_TRUE(ddp::timeline_from_fr_dumps(files, tl, err)) << err;
  ASSERT_EQ(tl.processes.size(), 64u);
  ASSERT_FALSE(tl.problems.empty());
  EXPECT_EQ(tl.problems.front().rfind("Flight Recorder: the ranks part at all_reduce #11", 0), 0u)
      << tl.problems.front();
  size_t spans_37 = 0, spans_0 = 0;
  bool named = false;
  for (const auto& p : tl.processes)
    for (const auto& lane : p.lanes)
      for (const auto& row : lane.rows)
        for (const auto& s : row.spans) {
          if (p.rank == 37) ++spans_37;
          if (p.rank == 0) ++spans_0;
          named = named || tl.name(s) == "all_reduce #11 [1024] Float";
        }
  EXPECT_EQ(spans_0, spans_37 + 1) << "rank 37 never enqueued #11";
  EXPECT_TRUE(named);
}

}  // namespace
