// The check judgements on recorded data, each shown passing on good data and failing on a planted fault.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "runtime/check/check_table.h"
#include "runtime/check/judges.h"
#include "runtime/common/manifest.h"
#include "runtime/data/sampler.h"
#include "tests/support/remove_tree.h"
#include "traces/model/event.h"
#include "traces/model/run_folder.h"
#include "traces/native/trace_writer.h"

namespace {
using namespace ddp;

nlohmann::json good_manifest_json() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "versions": {"libtorch": "1.13.0", "compiler": "g++ 12"}, "device": {"type": "cpu", "name": "x"},
    "backend": "gloo", "world_size": 2, "launch": {"method": "supervisor"},
    "seeds": {"data": 0, "weights": 0, "sampler": 0}, "host": "h", "start_time": "t",
    "ranks": [{"rank": 0, "host": "h", "pid": 1, "device": "cpu",
               "batch": {"x": {"shape": [64, 128], "dtype": "float32"}, "y": {"shape": [64], "dtype": "int64"}}},
              {"rank": 1, "host": "h", "pid": 2, "device": "cpu",
               "batch": {"x": {"shape": [64, 128], "dtype": "float32"}, "y": {"shape": [64], "dtype": "int64"}}}]})");
  j["config"] = records::to_json(job_config_record(JobConfig{}));
  return j;
}

std::optional<Manifest> good_manifest() {
  Manifest m;
  std::string err;
  EXPECT_TRUE(manifest_from_json(good_manifest_json(), m, err)) << err;
  return m;
}

TEST(Checks, ManifestPassesWhenCompleteAndNamesWhatIsMissing) {
  EXPECT_EQ(check_manifest(good_manifest(), "").status, CheckStatus::pass);
  auto m = good_manifest();
  m->fields.seeds->erase("sampler");
  auto r = check_manifest(m, "");
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("seeds/sampler"), std::string::npos) << r.summary;
  m = good_manifest();
  m->fields.ranks->pop_back();
  EXPECT_EQ(check_manifest(m, "").status, CheckStatus::fail);
  r = check_manifest(std::nullopt, "run/manifest.json is missing");
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_EQ(r.summary, "run/manifest.json is missing");
}

// A manifest whose field was renamed (or mistyped) does not read: env.manifest fails naming the field, never
// passes on what was left, nor says the file is missing.
TEST(Checks, AManifestAgainstTheTableFailsNamingTheField) {
  for (const auto& [from, to, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"world_size", "world", "field 'world_size': missing"},
           {"backend", "backends", "unknown field 'backends'"}}) {
    nlohmann::json j = good_manifest_json();
    j[to] = j[from];
    j.erase(from);
    Manifest m;
    std::string err;
    ASSERT_FALSE(manifest_from_json(j, m, err)) << from;
    EXPECT_NE(err.find(want), std::string::npos) << err;
  }
  nlohmann::json j = good_manifest_json();
  j["config"]["workers"] = "two";
  Manifest m;
  std::string err;
  ASSERT_FALSE(manifest_from_json(j, m, err));
  EXPECT_EQ(err, "field 'config.workers': not an integer");
  j = good_manifest_json();
  j["ranks"][1].erase("pid");
  ASSERT_FALSE(manifest_from_json(j, m, err));
  EXPECT_EQ(err, "field 'ranks[1].pid': missing");
}

// A toy sampler world: 20 samples, 2 ranks, batches of 4, orders given per epoch.
std::vector<int64_t> order_for(int epoch) {
  std::vector<int64_t> o(20);
  for (int i = 0; i < 20; ++i) o[i] = (i * (epoch == 0 ? 3 : 7)) % 20;
  return o;
}
std::vector<int64_t> rule(int epoch, int rank) {
  auto b = make_batches(shard_indices(order_for(epoch), rank, 2, true), 4, true);
  std::vector<int64_t> flat;
  for (auto& x : b) flat.insert(flat.end(), x.begin(), x.end());
  return flat;
}
std::vector<std::vector<ConsumedBatch>> consumed(bool broken, bool same_order) {
  std::vector<std::vector<ConsumedBatch>> out(2);
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 2; ++r) {
      auto idx = rule(same_order ? 0 : e, broken ? 0 : r);
      for (size_t b = 0; b * 4 < idx.size(); ++b)
        out[r].push_back({e, static_cast<int64_t>(b), 0, static_cast<int64_t>(b),
                          std::vector<int64_t>(idx.begin() + b * 4, idx.begin() + b * 4 + 4)});
    }
  return out;
}

ShardExpectation toy_rule() {
  ShardExpectation e;
  e.dataset_size = 20;
  e.shuffle = true;
  e.expected = rule;
  return e;
}

TEST(Checks, ShardRulePassesOnTheRuleAndCatchesBrokenShardsAndMissingSetEpoch) {
  auto ok = check_shard_rule(consumed(false, false), toy_rule());
  EXPECT_EQ(ok.status, CheckStatus::pass) << ok.summary;
  auto broken = check_shard_rule(consumed(true, false), toy_rule());
  EXPECT_EQ(broken.status, CheckStatus::fail);
  EXPECT_NE(broken.summary.find("rank 1"), std::string::npos) << broken.summary;
  EXPECT_GT(broken.details["passes"][0]["duplicates"].get<int>(), 0);
  auto stale = check_shard_rule(consumed(false, true), toy_rule());
  EXPECT_EQ(stale.status, CheckStatus::fail);
  EXPECT_NE(stale.summary.find("set_epoch"), std::string::npos) << stale.summary;
}

// The replicated state beside the parameters: the first key that differs, no later than the parameters do, is the
// cause; a buffer that drifts fails even with equal parameters.
TEST(Checks, RankSyncNamesTheFirstReplicatedSettingThatDiffers) {
  std::vector<Replicas> ranks(2);
  for (int s = -1; s < 4; ++s)
    for (auto& r : ranks) {
      r.param_hash[s] = "p" + std::to_string(s);
      r.state[s] = {{"buffers", "d" + std::to_string(s)},
                    {"buffer/1.running_mean", "0.5"},
                    {"optimizer/param_groups[0].lr", "0.003"},
                    {"sampler/seed", "0"}};
    }
  auto ok = check_rank_sync(ranks);
  EXPECT_EQ(ok.status, CheckStatus::pass) << ok.summary;
  EXPECT_NE(ok.summary.find("4 keys a step"), std::string::npos) << ok.summary;

  auto lr = ranks;  // a learning rate from the rank: differs from the start, the parameters after step 0
  for (auto& [s, pairs] : lr[1].state) pairs[2].second = "0.006";
  for (int s = 0; s < 4; ++s) lr[1].param_hash[s] = "q";
  auto r = check_rank_sync(lr);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("optimizer/param_groups[0].lr: 0.003 on rank 0, 0.006 on rank 1 at start (after the "
                           "initial broadcast); rank 1's parameters then differ from rank 0's after optimizer step 0"),
            std::string::npos)
      << r.summary;

  auto bn = ranks;  // BatchNorm statistics that drift from step 1 on, the parameters equal
  for (int s = 1; s < 4; ++s) {
    bn[1].state[s][0].second = "other";
    bn[1].state[s][1].second = "0.25";
  }
  r = check_rank_sync(bn);
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("buffer/1.running_mean: 0.5 on rank 0, 0.25 on rank 1 at optimizer step 1"),
            std::string::npos)
      << r.summary;
  EXPECT_NE(r.summary.find("DDP(broadcast_buffers=False) without SyncBatchNorm"), std::string::npos) << r.summary;
  bn[1].state[1][1].second = "0.5";  // only the bits differ at step 1: the joint digest names it
  r = check_rank_sync(bn);
  EXPECT_NE(r.summary.find("buffers: d1 on rank 0, other on rank 1 at optimizer step 1"), std::string::npos)
      << r.summary;

  auto params = ranks;  // the parameters first: the synchronisation
  params[1].param_hash[2] = "x";
  params[1].state[3][1].second = "0.1";
  r = check_rank_sync(params);
  EXPECT_NE(r.summary.find("rank 1's parameters differ from rank 0's after optimizer step 2"), std::string::npos)
      << r.summary;
}

TEST(Checks, RankSyncNamesTheFirstDivergentStep) {
  std::map<int64_t, std::string> a = {{-1, "x"}, {0, "a"}, {1, "b"}, {2, "c"}};
  auto b = a;
  EXPECT_EQ(check_rank_sync({a, b}).status, CheckStatus::pass);
  b[1] = "z";
  b[2] = "zz";
  auto r = check_rank_sync({a, b});
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_EQ(r.details["first_step"], 1);
  b = a;
  b[-1] = "other";
  EXPECT_NE(check_rank_sync({a, b}).summary.find("at start"), std::string::npos);
}

TEST(Checks, CompareValuesUsesAssertCloseSemanticsAndEstimatesTheScale) {
  std::vector<double> ref = {1.0, -2.0, 3.0};
  EXPECT_TRUE(compare_values("t", {1.0 + 1e-7, -2.0, 3.0}, ref, 1.3e-6, 1e-5).ok);
  auto half = compare_values("t", {0.5, -1.0, 1.5}, ref, 1.3e-6, 1e-5);
  EXPECT_FALSE(half.ok);
  EXPECT_NEAR(half.scale, 0.5, 1e-12);
  EXPECT_FALSE(compare_values("t", {NAN, -2.0, 3.0}, ref, 1.3e-6, 1e-5).ok);
  EXPECT_FALSE(compare_values("t", {1.0}, ref, 1.3e-6, 1e-5).ok);
}

NumericsEvidence evidence(double grad_scale, bool bn_diverges, bool samples_ok = true) {
  NumericsEvidence e;
  std::vector<double> ref = {0.1, -0.2, 0.3, 0.05};
  std::vector<double> got = ref;
  for (auto& v : got) v *= grad_scale;
  if (bn_diverges) got[2] += 0.01;
  e.grads.push_back(compare_values("fc1.weight", got, ref, 1.3e-6, 1e-5));
  e.activations.push_back(compare_values("fc1", ref, ref, 1.3e-6, 1e-5));
  auto bn = ref;
  if (bn_diverges) bn[0] += 0.1;
  e.activations.push_back(compare_values("bn1", bn, ref, 1.3e-6, 1e-5));
  e.layer_kinds = {"torch::nn::LinearImpl", "torch::nn::BatchNorm1dImpl"};
  e.samples_follow_rule = samples_ok;
  return e;
}

TEST(Checks, NumericsDiagnosesSumLossBatchNormAndForeignSamples) {
  EXPECT_EQ(judge_numerics({evidence(1.0, false)}, 2, 1.3e-6, 1e-5).status, CheckStatus::pass);
  auto sum = judge_numerics({evidence(0.5, false)}, 2, 1.3e-6, 1e-5);
  EXPECT_EQ(sum.status, CheckStatus::fail);
  EXPECT_NE(sum.summary.find("sum-reduced loss"), std::string::npos) << sum.summary;
  auto twice = judge_numerics({evidence(2.0, false)}, 2, 1.3e-6, 1e-5);
  EXPECT_NE(twice.summary.find("summed, not averaged"), std::string::npos) << twice.summary;
  EXPECT_NE(twice.summary.find("the world size applied twice"), std::string::npos) << twice.summary;
  auto e3 = evidence(3.0, false);
  e3.micro_batches = 3;  // k is the accumulation, not the world
  auto thrice = judge_numerics({e3}, 2, 1.3e-6, 1e-5);
  EXPECT_NE(thrice.summary.find("gradients are 3x the single-process gradient of the same global batch: "
                                "accumulation over 3 micro-batches whose losses are not divided by 3"),
            std::string::npos)
      << thrice.summary;
  EXPECT_EQ(thrice.summary.find("world size"), std::string::npos) << thrice.summary;
  auto bn = judge_numerics({evidence(1.0, true)}, 2, 1.3e-6, 1e-5);
  EXPECT_NE(bn.summary.find("bn1"), std::string::npos) << bn.summary;
  EXPECT_NE(bn.summary.find("batch statistics"), std::string::npos) << bn.summary;
  auto foreign = judge_numerics({evidence(1.0, true, false)}, 2, 1.3e-6, 1e-5);
  EXPECT_NE(foreign.summary.find("other samples"), std::string::npos) << foreign.summary;
}

TEST(Checks, CheckpointItemsListWhatIsMissing) {
  std::vector<std::string> expected = {"model.w", "optimizer.state.w.step", "rng.torch_cpu"};
  EXPECT_EQ(check_checkpoint_items(expected, expected, "f").status, CheckStatus::pass);
  auto r = check_checkpoint_items(expected, {"model.w", "rng.torch_cpu"}, "f");
  EXPECT_EQ(r.status, CheckStatus::fail);
  EXPECT_NE(r.summary.find("optimizer.state.w.step"), std::string::npos);
}

FaultScenario scenario(const std::string& kind, int exit_code, int culprit, double slowest, const std::string& msg) {
  FaultScenario s;
  s.kind = kind;
  s.outcome.exit_code = exit_code;
  s.outcome.culprit = culprit;
  s.outcome.message = msg;
  s.outcome.ranks = {RankOutcome{}, RankOutcome{}};
  s.outcome.ranks[0].ended_after_fault_s = slowest;
  s.traces_export = true;
  return s;
}

TEST(Checks, FaultsNeedExitOneTheCulpritItsStepAndStageAndFastEnds) {
  const std::string msg = "rank 1 failed: injected (at epoch 0 step 3, stage forward)";
  EXPECT_EQ(judge_faults({scenario("kill", 1, 1, 0.1, msg), scenario("hang", 1, 1, 6.0, msg)}).status,
            CheckStatus::pass);
  EXPECT_EQ(judge_faults({scenario("kill", 0, 1, 0.1, msg)}).status, CheckStatus::fail);
  EXPECT_EQ(judge_faults({scenario("kill", 1, 0, 0.1, "rank 0 failed at step 3, stage forward")}).status,
            CheckStatus::fail);
  EXPECT_EQ(judge_faults({scenario("kill", 1, 1, 6.0, msg)}).status, CheckStatus::fail) << "5 s limit";
  EXPECT_EQ(judge_faults({scenario("hang", 1, 1, 11.0, msg)}).status, CheckStatus::fail) << "10 s limit";
  EXPECT_EQ(judge_faults({scenario("throw", 1, 1, 0.1, "rank 1 failed: boom")}).status, CheckStatus::fail);
  auto no_export = scenario("kill", 1, 1, 0.1, msg);
  no_export.traces_export = false;
  EXPECT_EQ(judge_faults({no_export}).status, CheckStatus::fail);
}

// A fault run whose rank lost its trace: faults.exit must say so (this branch was unreachable once, leaving the
// reason empty).
TEST(Checks, FaultRunExportNamesAMissingRankTrace) {
  namespace fs = std::filesystem;
  const std::string dir = (fs::temp_directory_path() / ("ddp_fault_export_" + std::to_string(::getpid()))).string();
  ddp::testing::remove_tree(fs::path(dir).string());
  fs::create_directories(dir);
  const int world = 2;
  for (int r = 0; r < world; ++r) {
    TraceWriter tw;
    std::string err;
    ASSERT_TRUE(tw.open(in_run(dir, rank_trace_file(r)), r, world, err)) << err;
    tw.write_lane(0, "main");
    Event e = make_span(Stage::step, 0, 1000, 2000);
    tw.write_events(0, &e, 1);
    tw.write_end(1, 0);
    tw.close();
  }
  std::string err;
  EXPECT_TRUE(export_fault_run_traces(dir, world, err)) << err;
  EXPECT_TRUE(fs::exists(in_run(dir, kChromeTraceFile)));

  fs::remove(in_run(dir, rank_trace_file(1)));
  err.clear();
  EXPECT_FALSE(export_fault_run_traces(dir, world, err));
  EXPECT_NE(err.find("a rank's trace is missing (1 of 2)"), std::string::npos) << err;
  ddp::testing::remove_tree(fs::path(dir).string());
}

TEST(Checks, JsonShapeIsTheStableInterface) {
  std::vector<CheckResult> rs(2);
  rs[0].id = "env.manifest";
  rs[0].status = CheckStatus::pass;
  rs[1].id = "faults.exit";
  rs[1].status = CheckStatus::fail;
  auto j = checks_json(rs);
  ASSERT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(j["checks"][1]["status"], "fail");
  EXPECT_TRUE(j["checks"][0].contains("summary"));
  EXPECT_TRUE(j["checks"][0]["details"].is_object());
  EXPECT_EQ(j["failed"], 1);
}
}  // namespace

namespace {
using namespace ddp;

// Our job's comm.no_sync evidence from its trace: allreduce spans per (step, micro-step) and per bucket. Accumulation
// over 2 micro-steps with 2 buckets of 100 bytes each; planted: an allreduce on the first micro-step (no_sync not in
// effect), a bucket never reduced, a bucket reduced twice.
RunTrace accumulation_trace(bool early_allreduce, bool missing_bucket, bool twice) {
  RunTrace run;
  RankTrace r;
  r.rank = 0;
  for (uint32_t step = 0; step < 3; ++step) {
    Event s = make_span(Stage::step, 0, step * 100, step * 100 + 90);
    s.step = step;
    r.events.push_back(s);
    auto reduce = [&](uint16_t bucket, uint8_t micro) {
      Event a = make_span(Stage::allreduce, 1, step * 100 + 10, step * 100 + 20);
      a.step = step;
      a.micro = micro;
      a.bucket = bucket;
      a.value = 100;
      r.events.push_back(a);
    };
    if (early_allreduce && step == 1) reduce(0, 0);
    reduce(0, 1);
    if (!(missing_bucket && step == 2)) reduce(1, 1);
    if (twice && step == 2) reduce(1, 1);
  }
  run.ranks.push_back(r);
  return run;
}

TEST(Checks, NoSyncFromOurTraceNeedsOneAllreducePerBucketOnTheLastMicroStep) {
  auto ok = judge_no_sync(no_sync_from_trace(accumulation_trace(false, false, false), 2, 2, 200));
  EXPECT_EQ(ok.status, CheckStatus::pass) << ok.summary;
  EXPECT_NE(ok.summary.find("3 accumulated step(s)"), std::string::npos) << ok.summary;
  auto early = judge_no_sync(no_sync_from_trace(accumulation_trace(true, false, false), 2, 2, 200));
  EXPECT_EQ(early.status, CheckStatus::fail);
  EXPECT_NE(early.summary.find("rank 0, step 1: micro-step 0 of 2 ran 1 gradient allreduce(s)"), std::string::npos)
      << early.summary;
  EXPECT_NE(early.summary.find("no_sync was not in effect"), std::string::npos) << early.summary;
  auto missing = judge_no_sync(no_sync_from_trace(accumulation_trace(false, true, false), 2, 2, 200));
  EXPECT_EQ(missing.status, CheckStatus::fail);
  EXPECT_NE(missing.summary.find("1 of 2 buckets reduced"), std::string::npos) << missing.summary;
  auto twice = judge_no_sync(no_sync_from_trace(accumulation_trace(false, false, true), 2, 2, 200));
  EXPECT_EQ(twice.status, CheckStatus::fail);
  EXPECT_NE(twice.summary.find("each must be exactly once"), std::string::npos) << twice.summary;
  EXPECT_EQ(judge_no_sync(no_sync_from_trace(accumulation_trace(false, false, false), 2, 2, 300)).status,
            CheckStatus::fail)
      << "the bytes must be the parameters'";
  EXPECT_EQ(judge_no_sync(no_sync_from_trace(RunTrace{}, 2, 2, 200)).status, CheckStatus::fail) << "no traces";
}

// A verification log damaged mid-line (a rank killed while writing) is named, file and line, not read as less data.
TEST(Checks, ADamagedVerificationLogIsNamedNotSkipped) {
  namespace fs = std::filesystem;
  const std::string dir = (fs::temp_directory_path() / ("ddp_damaged_log_" + std::to_string(::getpid()))).string();
  ddp::testing::remove_tree(dir);
  fs::create_directories(dir + "/verify");
  std::ofstream(in_run(dir, verify_replicas_file(0))) << "{\"step\":-1,\"param_hash\":\"aa\"}\n{\"step\":0,\"par";
  std::string err;
  EXPECT_TRUE(read_replica_hashes(dir, 0, err).empty());
  EXPECT_NE(err.find("rank0.replicas.jsonl: 1 unreadable line(s), first at line 2"), std::string::npos) << err;
  std::ofstream(in_run(dir, verify_samples_file(0)))
      << "{\"epoch\":0,\"step\":0,\"micro\":0,\"batch\":0,\"indices\":[1]}\n"
      << "not json\n";
  err.clear();
  EXPECT_TRUE(read_consumed(dir, 0, err).empty());
  EXPECT_NE(err.find("first at line 2"), std::string::npos) << err;
  ddp::testing::remove_tree(dir);
}
}  // namespace
