// Digests (traces/kineto/kineto_digest.h): what the importer keeps of a trace, made where it lies and analysed
// elsewhere. The analysis of digests must be the analysis of the traces; a digest must be small; a damaged digest,
// a foreign file or a name two traces would share must be said, never read as something else.
#include "tests/traces/kineto/kineto_import_support.h"
#include "traces/kineto/kineto_digest.h"

using namespace kineto_import_test;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<DigestMade> digest(const std::vector<std::string>& inputs, const std::string& out,
                               const std::vector<std::string>& maps = {}) {
  KinetoStageMap map;
  std::string err;
  for (const auto& m : maps) EXPECT_TRUE(map.add_user_rule(m, err)) << err;
  std::vector<DigestMade> made;
  EXPECT_TRUE(make_digests(inputs, map, out, made, err)) << err;
  return made;
}

// Every field of every event the analysis, the summary and the exports read.
void expect_same_events(const RunTrace& a, const RunTrace& b) {
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankTrace &x = a.ranks[r], &y = b.ranks[r];
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.lanes, y.lanes);
    EXPECT_EQ(x.meta, y.meta);
    EXPECT_EQ(x.clock_offset_ns(), y.clock_offset_ns());
    ASSERT_EQ(x.events.size(), y.events.size()) << "rank " << x.rank;
    for (size_t i = 0; i < x.events.size(); ++i)
      ASSERT_EQ(std::memcmp(&x.events[i], &y.events[i], sizeof(Event)), 0) << "rank " << x.rank << " event " << i;
  }
}

// The analysis from digests, against the one from the traces: equal as JSON, whole.
void expect_same_analysis(const std::vector<std::string>& traces, const std::string& name) {
  const std::string d = temp_dir("digest_" + name);
  const std::vector<DigestMade> made = digest(traces, d);
  ASSERT_FALSE(made.empty());
  const RunTrace raw = load(traces), dig = load({d});
  expect_same_events(raw, dig);
  EXPECT_EQ(raw.problems, dig.problems);
  const nlohmann::json a = analysis_json(analyze(raw)), b = analysis_json(analyze(dig));
  EXPECT_EQ(a, b) << name;
  EXPECT_FALSE(a["causes"].empty() && a["verdict"].get<std::string>().empty()) << "an analysis that says something";
  // The report says which ranks came from digests, and which digest each file's numbers were read from.
  const nlohmann::json rep = kineto_report_json(dig);
  for (const auto& f : rep["files"]) EXPECT_TRUE(f.contains("digest")) << f.dump();
  EXPECT_NE(rep["notes"].dump().find("read from digests"), std::string::npos) << rep.dump();
  fs::remove_all(d);
}

TEST(KinetoDigest, AnalysisOfDigestsIsTheAnalysisOfTheTraces) {
  for (const char* s :
       {"balanced", "slow-data-rank1", "slow-forward-rank0", "slow-optimizer-rank1", "gloo-pinned-batch"})
    expect_same_analysis({kCpu + "/" + s}, s);
  expect_same_analysis({kData + "/pytorch-2.11-gpu/gloo2-cuda-h200"}, "gpu");  // CUDA records, kernels' names
  expect_same_analysis({kData + "/hta/sampled_rank-0.json.gz", kData + "/hta/sampled_rank-1.json.gz"}, "hta");
}

TEST(KinetoDigest, ADigestIsUnderOnePercentOfItsTrace) {
  const std::string d = temp_dir("digest_size");
  for (const std::string& in :
       {kCpu + "/slow-data-rank1", kData + "/pytorch-2.11-gpu/gloo2-cuda-h200", kData + "/hta/nccl_data.json.gz"})
    for (const DigestMade& m : digest({in}, d)) {
      std::string text;
      ASSERT_TRUE(read_chrome_bytes(m.trace, text).ok());
      EXPECT_EQ(m.json_bytes, text.size()) << m.trace;
      EXPECT_LT(m.digest_bytes * 100, text.size()) << m.digest << ": " << m.digest_bytes << " bytes of " << text.size();
      EXPECT_EQ(m.trace_bytes, fs::file_size(m.trace));
    }
  fs::remove_all(d);
}

// Nodes digest their own files into one folder, one call each; a node digesting again replaces its own digests.
TEST(KinetoDigest, SeveralCallsFillOneFolderAndACallAgainReplacesItsOwn) {
  const std::string d = temp_dir("digest_calls");
  digest({rank_file("slow-forward-rank0", 0)}, d);
  digest({rank_file("slow-forward-rank0", 1)}, d);
  const auto again = digest({rank_file("slow-forward-rank0", 1)}, d);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(fs::path(again[0].digest).filename().string().rfind("rank1.", 0), 0u) << again[0].digest;
  const RunTrace raw = load({kCpu + "/slow-forward-rank0"}), dig = load({d});
  EXPECT_EQ(analysis_json(analyze(raw)), analysis_json(analyze(dig)));
  fs::remove_all(d);
}

// Another trace whose digest would take an existing digest's name: refused before anything is written.
TEST(KinetoDigest, AnotherTracesDigestOfTheSameNameIsRefusedAndNothingIsWritten) {
  const std::string d = temp_dir("digest_clash"), other = temp_dir("digest_clash_src");
  const auto first = digest({kCpu + "/balanced"}, d);
  ASSERT_EQ(first.size(), 2u);
  const std::string before = read_bytes(first[0].digest) + read_bytes(first[1].digest);
  // The same file names, another job's traces (another folder): both ranks' names are taken.
  for (int r = 0; r < 2; ++r)
    fs::copy_file(rank_file("slow-data-rank1", r),
                  other + "/" + fs::path(rank_file("balanced", r)).filename().string());
  KinetoStageMap map;
  std::vector<DigestMade> made;
  std::string err;
  EXPECT_FALSE(make_digests({other}, map, d, made, err));
  EXPECT_NE(err.find("already holds the digest of"), std::string::npos) << err;
  EXPECT_TRUE(made.empty());
  EXPECT_EQ(read_bytes(first[0].digest) + read_bytes(first[1].digest), before);
  // Digests of digests are not made.
  EXPECT_FALSE(make_digests({d}, map, other + "/again", made, err));
  EXPECT_NE(err.find("already a digest"), std::string::npos) << err;
  fs::remove_all(d);
  fs::remove_all(other);
}

// A damaged digest is one damaged rank, named, as a damaged trace is; the others load.
TEST(KinetoDigest, ADamagedDigestIsNamedAndTheOtherRanksLoad) {
  const std::string d = temp_dir("digest_damage");
  const auto made = digest({kCpu + "/balanced"}, d);
  ASSERT_EQ(made.size(), 2u);
  const std::string bytes = read_bytes(made[1].digest);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bytes.substr(0, bytes.size() / 2), "damaged"},                                // cut off
      {"{\"traceEvents\": []}" + std::string(20, ' '), "not a ddp_profile digest"},  // a foreign file
      {bytes.substr(0, 20) + std::string(bytes.size() - 20, '\x5a'), "damaged"},     // garbage after the header
  };
  for (const auto& [content, says] : cases) {
    write_text(made[1].digest, content);
    const kineto_detail::KFile f = read_digest(made[1].digest);
    EXPECT_FALSE(f.status.ok());
    EXPECT_NE(f.status.message.find(says), std::string::npos) << f.status.message;
    RunTrace run;
    std::string err;
    const bool ok = load_kineto_run({d}, KinetoStageMap{}, run, err);
    std::string said = err;
    for (const std::string& p : run.problems) said += "\n" + p;
    EXPECT_NE(said.find(fs::path(made[1].digest).filename().string()), std::string::npos) << said;
    if (ok) {
      EXPECT_EQ(run.ranks.size(), 1u) << said;
    }
  }
  fs::remove_all(d);
}

// A damaged trace's digest carries its damage: the analysis of digests lists it as that of the traces does.
TEST(KinetoDigest, ADamagedTracesDigestSaysSoAsTheTraceWould) {
  const std::string src = temp_dir("digest_bad_src"), d = temp_dir("digest_bad");
  for (int r = 0; r < 3; ++r)
    fs::copy_file(rank_file("balanced", r % 2), src + "/rank" + std::to_string(r) + ".pt.trace.json.gz");
  write_text(src + "/rank2.pt.trace.json.gz", "not gzip at all");
  const auto made = digest({src}, d);
  ASSERT_EQ(made.size(), 3u);
  size_t with_problem = 0;
  for (const DigestMade& m : made) with_problem += !m.problem.empty();
  EXPECT_EQ(with_problem, 1u);
  RunTrace raw, dig;
  std::string e1, e2;
  const bool ok_raw = load_kineto_run({src}, KinetoStageMap{}, raw, e1);
  const bool ok_dig = load_kineto_run({d}, KinetoStageMap{}, dig, e2);
  EXPECT_EQ(ok_raw, ok_dig);
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(raw.problems, dig.problems);
  fs::remove_all(src);
  fs::remove_all(d);
}

// The user's --map rules apply where the events are: a digest made with them keeps the stages they name.
TEST(KinetoDigest, MapRulesApplyWhenTheDigestIsMade) {
  const std::string d = temp_dir("digest_map");
  const std::vector<std::string> maps = {"aten::addmm=forward"};
  digest({kCpu + "/balanced"}, d, maps);
  const RunTrace raw = load({kCpu + "/balanced"}, maps), dig = load({d});
  expect_same_events(raw, dig);
  fs::remove_all(d);
}

// The viewer builds its timeline from every event: digests are refused, by name.
TEST(KinetoDigest, TheViewersReadingRefusesDigests) {
  const std::string d = temp_dir("digest_viewer");
  digest({kCpu + "/balanced"}, d);
  RunTrace run;
  std::string err;
  const KinetoFileEvents each = [](const std::string&) { return ChromeEventFn{}; };
  EXPECT_FALSE(load_kineto_run({d}, KinetoStageMap{}, run, err, 0, &each));
  EXPECT_NE(err.find("a digest (ddp_profile --digest)"), std::string::npos) << err;
  fs::remove_all(d);
}

}  // namespace
