// Run diff, folders and JSON: unreadable or damaged inputs, rank file names, the documented JSON shape.
// Every check comes with its planted difference: the same assertion on the unchanged pair must come out the other way.
#include "tests/traces/diff/run_diff_support.h"

using namespace run_diff_test;

namespace {

// ---- folders -----------------------------------------------------------------------------------------------------

// File names are parsed, never trusted: a rank number that does not fit is not a rank file (it threw out of --diff).
TEST(RunFolderNames, RankNumbersThatDoNotFitAreNotRankFiles) {
  int rank = -1;
  int64_t step = -1;
  EXPECT_TRUE(ddp::is_verify_log_file("rank3.samples.jsonl", ddp::kVerifySamples, &rank));
  EXPECT_EQ(rank, 3);
  EXPECT_FALSE(ddp::is_verify_log_file("rank99999999999.samples.jsonl", ddp::kVerifySamples, &rank));
  EXPECT_FALSE(ddp::is_rank_trace_file("rank99999999999.ddpt", &rank));
  EXPECT_TRUE(ddp::is_verify_step_file("rank1_step7.pt", &rank, &step));
  EXPECT_EQ(step, 7);
  EXPECT_FALSE(ddp::is_verify_step_file("rank1_step99999999999999999999999.pt", &rank, &step));
}

TEST(RunDiffFolders, UnreadableFoldersAreErrors) {
  TempDir t;
  ddp::DiffRun r;
  std::string err;
  EXPECT_FALSE(ddp::load_diff_run((t.path / "missing").string(), r, err));
  EXPECT_NE(err.find("not a directory"), std::string::npos);
  std::ofstream((t.path / "file").string()) << "x";
  EXPECT_FALSE(ddp::load_diff_run((t.path / "file").string(), r, err));
  std::string empty = t.sub("empty");
  EXPECT_FALSE(ddp::load_diff_run(empty, r, err));
  EXPECT_NE(err.find("nothing to compare"), std::string::npos);
  std::string garbage = t.sub("garbage");
  std::ofstream(garbage + "/manifest.json") << "{ not json";
  EXPECT_FALSE(ddp::load_diff_run(garbage, r, err));
  std::ofstream(garbage + "/rank0.ddpt") << "not a trace";
  EXPECT_FALSE(ddp::load_diff_run(garbage, r, err));

  // Planted: the same folders become readable once they hold something to compare.
  write_manifest(empty, base_manifest());
  EXPECT_TRUE(ddp::load_diff_run(empty, r, err)) << err;
  write_summaries(garbage, 0, base_records(1));
  EXPECT_TRUE(ddp::load_diff_run(garbage, r, err)) << err;
  EXPECT_FALSE(r.problems.empty());  // the damaged manifest and trace are reported
  EXPECT_FALSE(r.has_traces);
  EXPECT_EQ(r.summaries.at(0).size(), base_records(1).size());
}

TEST(RunDiffFolders, DamagedLinesAreReportedAndSkipped) {
  TempDir t;
  std::string a = t.sub("a");
  write_manifest(a, base_manifest());
  auto recs = base_records(2);
  write_summaries(a, 0, recs);
  ddp::DiffRun r;
  std::string err;
  ASSERT_TRUE(ddp::load_diff_run(a, r, err));
  EXPECT_TRUE(r.problems.empty());
  // Planted: a run killed mid-line leaves a truncated last line.
  std::ofstream(a + "/verify/rank0.summaries.jsonl", std::ios::app) << "{\"step\":2,\"kind\":\"par";
  ASSERT_TRUE(ddp::load_diff_run(a, r, err));
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("1 unreadable line"), std::string::npos);
  EXPECT_EQ(r.summaries.at(0).size(), recs.size());
}

TEST(RunDiffJson, DocumentedShape) {
  TensorPair p;
  auto b0 = p.ra0;
  Rec& r = find(b0, 1, "grad", "fc1.bias");
  r.mean *= 1.1;
  r.hash = "z";
  p.write(b0, p.ra1);
  for (uint32_t k = 0; k < 2; ++k) {
    write_trace(p.a, k, 2, 4, StageMs{});
    write_trace(p.b, k, 2, 4, StageMs{});
  }
  write_replicas(p.a, 0, {"i", "a"});
  write_replicas(p.b, 0, {"i", "b"});
  auto d = diff_dirs(p.a, p.b);
  json j = json::parse(ddp::run_diff_json(d).dump());
  for (const char* k : {"a", "b", "config", "timing", "tensors", "replicas"}) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["a"]["dir"], p.a);
  EXPECT_TRUE(j["config"]["differences"].is_array());
  EXPECT_TRUE(j["config"]["warning"].is_null());
  EXPECT_EQ(j["timing"]["source"], "traces");
  EXPECT_EQ(j["timing"]["ranks"].size(), 2u);
  EXPECT_TRUE(j["timing"]["mean"]["step_median_ms"].contains("delta_pct"));
  const json& f = j["tensors"]["first_divergence"];
  EXPECT_EQ(f["step"], 1);
  EXPECT_EQ(f["kind"], "grad");
  EXPECT_EQ(f["name"], "fc1.bias");
  EXPECT_TRUE(f["micro"].is_null());
  EXPECT_EQ(f["reason"], "mean");
  EXPECT_TRUE(f["a"].contains("hash"));
  EXPECT_GT(f["rel"]["mean"].get<double>(), 1e-4);
  EXPECT_EQ(j["tensors"]["ranks"][0]["diverged"], 1);
  EXPECT_EQ(j["replicas"]["first_step"], 0);
  EXPECT_EQ(j["replicas"]["ranks"][0]["hash_b"], "b");
}

}  // namespace
