// Per-rank PyTorch profiler (Kineto) traces opened as one run: the stage mapping, rank identity, the clock alignment
// and the analysis, on real traces nobody here wrote (tests/data/kineto/, see tests/data/README.md).
#include "tests/traces/kineto/kineto_import_support.h"

using namespace kineto_import_test;
TEST(KinetoMap, BuiltInNames) {
  EXPECT_EQ(stage_of("ProfilerStep#12", "user_annotation"), Stage::step);
  EXPECT_EQ(stage_of("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "user_annotation"),
            Stage::wait_data);
  EXPECT_EQ(stage_of("DistributedDataParallel.forward", "user_annotation"), Stage::forward);
  EXPECT_EQ(stage_of("## forward ##", "user_annotation"), Stage::forward);
  EXPECT_EQ(stage_of("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op"), Stage::backward);
  EXPECT_EQ(stage_of("## backward ##", "user_annotation"), Stage::backward);
  EXPECT_EQ(stage_of("Optimizer.step#AdamW.step", "user_annotation"), Stage::optimizer);
  EXPECT_EQ(stage_of("Optimizer.zero_grad#AdamW.zero_grad", "user_annotation"), Stage::optimizer);
  EXPECT_EQ(stage_of("gloo:all_reduce", "user_annotation"), Stage::allreduce);
  EXPECT_EQ(stage_of("nccl:all_reduce", "user_annotation"), Stage::allreduce);
  EXPECT_EQ(stage_of("c10d::allreduce_", "cpu_op"), Stage::allreduce);
  EXPECT_EQ(stage_of("record_param_comms", "cpu_op", "allreduce"), Stage::allreduce);
  EXPECT_EQ(stage_of("record_param_comms", "cpu_op", "broadcast"), std::nullopt);
  EXPECT_EQ(stage_of("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "kernel"), Stage::nccl);
  EXPECT_EQ(stage_of("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel"),
            Stage::nccl);
  EXPECT_EQ(stage_of("ampere_sgemm_32x32_sliced1x4_tn", "kernel"), Stage::kernel);
  EXPECT_EQ(stage_of("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy"), Stage::memcpy_h2d);
  EXPECT_EQ(stage_of("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"), Stage::memcpy_h2d);
  EXPECT_EQ(stage_of("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy"), Stage::memcpy_d2h);
  EXPECT_EQ(stage_of("cudaStreamSynchronize", "cuda_runtime"), Stage::sync);
  EXPECT_EQ(stage_of("cudaDeviceSynchronize", "cuda_runtime"), Stage::sync);
  EXPECT_EQ(stage_of("cudaLaunchKernel", "cuda_runtime"), Stage::cuda_api);
  // The GPU-side copy of a host annotation is not a second step.
  EXPECT_EQ(stage_of("ProfilerStep#12", "gpu_user_annotation"), std::nullopt);
  EXPECT_EQ(stage_of("aten::mm", "cpu_op"), std::nullopt);
  EXPECT_EQ(stage_of("slow_optimizer_sleep", "user_annotation"), std::nullopt);
}

TEST(KinetoMap, UserRulesComeFirstAndBadOnesAreNamed) {
  KinetoStageMap map;
  std::string err;
  ASSERT_TRUE(map.add_user_rule("^slow_.*_sleep$=optimizer", err)) << err;
  ASSERT_TRUE(map.add_user_rule("aten::mm=forward", err)) << err;
  EXPECT_EQ(map.classify("slow_optimizer_sleep", "user_annotation")->stage, Stage::optimizer);
  EXPECT_TRUE(map.classify("aten::mm", "cpu_op")->user);
  EXPECT_FALSE(map.add_user_rule("([unclosed=forward", err));
  EXPECT_NE(err.find("([unclosed"), std::string::npos) << err;
  EXPECT_FALSE(map.add_user_rule("foo=not_a_stage", err));
  EXPECT_NE(err.find("not_a_stage"), std::string::npos) << err;
  EXPECT_FALSE(map.add_user_rule("no_equals_sign", err));
}

TEST(KinetoFile, RankFromFileName) {
  int r = -1;
  EXPECT_TRUE(kineto_detail::rank_from_file_name("rank3.1796.pt.trace.json", r));
  EXPECT_EQ(r, 3);
  EXPECT_TRUE(kineto_detail::rank_from_file_name("sampled_rank-1.json.gz", r));
  EXPECT_EQ(r, 1);
  EXPECT_TRUE(kineto_detail::rank_from_file_name("job_rank_12_trace.json", r));
  EXPECT_EQ(r, 12);
  EXPECT_FALSE(kineto_detail::rank_from_file_name("trace.json", r));
  EXPECT_FALSE(kineto_detail::rank_from_file_name("ranking.json", r));
}

TEST(KinetoAlign, MedianOfMatchedEndsAndItsSpread) {
  std::vector<CollectiveAnchor> ref, mine;
  for (uint32_t k = 0; k < 9; ++k) {
    const int64_t t = 1'000'000 * k;
    ref.push_back({"", k, 0, 100, t - 50'000, t});
    mine.push_back({"", k, 0, 100, t - 50'000, t + 5'000 + (k % 3) * 100});  // ends 5.0, 5.1, 5.2 us later
  }
  mine.push_back({"", 99, 0, 100, 0, 7});  // no partner: not matched
  ClockEstimate e = estimate_offset(1, mine, ref);
  EXPECT_TRUE(e.measured);
  EXPECT_EQ(e.matched, 9u);
  EXPECT_EQ(e.offset_ns, 5'100);
  EXPECT_EQ(e.mad_ns, 100);
  EXPECT_TRUE(e.bounded);
  EXPECT_FALSE(e.clamped);
  EXPECT_EQ(e.min_ns, -50'000);  // my start - its end
  EXPECT_EQ(e.max_ns, 55'000);   // my end - its start, smallest over the matches
  mine[0].bytes = 200;           // a different size is a different collective
  EXPECT_EQ(estimate_offset(1, mine, ref).matched, 8u);
}

// A rank whose ends are recorded late by a steady amount: the median would be off by that much; one collective where
// it started late shows the offset cannot be that large, and the median is kept inside.
TEST(KinetoAlign, MedianIsKeptInsideTheCausalityBounds) {
  std::vector<CollectiveAnchor> ref, mine;
  for (uint32_t k = 0; k < 9; ++k) {
    const int64_t t = 1'000'000 * k;
    ref.push_back({"", k, 0, 0, t - 100'000, t});
    mine.push_back({"", k, 0, 0, t - 90'000, t + 2'000'000});  // same clock, ends recorded 2 ms late
  }
  ref[4].start_ns = mine[4].end_ns - 30'000;  // the reference started just before this rank's end
  ClockEstimate e = estimate_offset(1, mine, ref);
  EXPECT_TRUE(e.bounded);
  EXPECT_TRUE(e.clamped);
  EXPECT_EQ(e.max_ns, 30'000);
  EXPECT_EQ(e.offset_ns, 30'000) << "not the 2 ms the ends alone say";
}

TEST(KinetoImport, RealTracePairBecomesTheRunModel) {
  RunTrace run = load({kCpu + "/balanced"});
  ASSERT_EQ(run.ranks.size(), 2u);
  EXPECT_TRUE(run.problems.empty()) << run.problems.front();
  EXPECT_TRUE(is_kineto_run(run));
  ASSERT_TRUE(run.manifest.has_value());
  EXPECT_EQ(run.manifest->fields.backend, "gloo") << "from the files' distributedInfo";
  for (const RankTrace& r : run.ranks) {
    EXPECT_EQ(r.world, 2u);
    EXPECT_EQ(count(r, Stage::step), 30u);  // ProfilerStep#2..#31
    std::set<uint32_t> steps;
    for (const Event& e : r.events)
      if (e.stage_id() == Stage::step) steps.insert(e.step);
    EXPECT_EQ(*steps.begin(), 2u);
    EXPECT_EQ(*steps.rbegin(), 31u);
    // One allreduce per step (the model is one bucket): gloo:all_reduce only, not also c10d::allreduce_.
    EXPECT_EQ(count(r, Stage::allreduce), 30u);
    EXPECT_EQ(count(r, Stage::wait_data), 30u);
    EXPECT_EQ(count(r, Stage::forward), 30u);
    EXPECT_EQ(count(r, Stage::optimizer), 60u);  // zero_grad and step
    EXPECT_GT(count(r, Stage::wait_comm), 20u);
    bool gloo_lane = false;
    for (const auto& l : r.lanes) gloo_lane |= l.find("pt_gloo_runloop") != std::string::npos;
    EXPECT_TRUE(gloo_lane) << "lanes keep Kineto's thread names";
    // Every span carries the step of the ProfilerStep window it falls in.
    std::map<uint32_t, std::pair<int64_t, int64_t>> window;
    for (const Event& e : r.events)
      if (e.stage_id() == Stage::step) window[e.step] = {e.t0, e.t1};
    for (const Event& e : r.events)
      if (e.stage_id() == Stage::forward) {
        ASSERT_TRUE(window.count(e.step));
        EXPECT_GE(e.t0, window[e.step].first);
        EXPECT_LT(e.t0, window[e.step].second);
      }
  }
  const nlohmann::json rep = kineto_report_json(run);
  ASSERT_EQ(rep["clock_alignment"].size(), 2u);
  EXPECT_GE(rep["clock_alignment"][1]["collectives"].get<int>(), 25);
  EXPECT_NE(kineto_report_text(run).find("rank 1: "), std::string::npos);
}

TEST(KinetoImport, NestedMatchesOfAStageCountOnce) {
  RunTrace run = load({kCpu + "/balanced"});
  for (const RankTrace& r : run.ranks) {
    std::vector<const Event*> bw;
    for (const Event& e : r.events)
      if (e.stage_id() == Stage::backward) bw.push_back(&e);
    for (size_t i = 1; i < bw.size(); ++i)
      if (bw[i]->lane == bw[i - 1]->lane) {
        EXPECT_GE(bw[i]->t0, bw[i - 1]->t1) << "backward spans do not nest";
      }
  }
}

namespace {
struct Planted {
  const char* scenario;
  int rank;
  const char* stage;
  std::vector<std::string> maps;
};
class KinetoPlanted : public ::testing::TestWithParam<Planted> {};
}  // namespace

TEST_P(KinetoPlanted, TopCauseIsThePlantedRankAndStage) {
  const Planted& p = GetParam();
  Analysis a = analyze(load({kCpu + "/" + p.scenario}, p.maps));
  ASSERT_FALSE(a.causes.empty()) << analysis_text(a);
  EXPECT_EQ(a.causes.front().rank, p.rank) << analysis_text(a);
  EXPECT_EQ(a.causes.front().stage, p.stage) << analysis_text(a);
  EXPECT_GE(a.causes.front().share, kDominantShare) << analysis_text(a);
}

// slow-optimizer-rank1 sleeps in the user's own record_function("slow_optimizer_sleep") next to the optimizer step:
// the user says what it is with --map, as docs/kineto.md tells them to.
INSTANTIATE_TEST_SUITE_P(
    RealTraces, KinetoPlanted,
    ::testing::Values(Planted{"slow-data-rank1", 1, "wait_data", {}}, Planted{"slow-forward-rank0", 0, "forward", {}},
                      Planted{"slow-optimizer-rank1", 1, "optimizer", {"^slow_optimizer_sleep$=optimizer"}}),
    [](const auto& i) {
      std::string n = i.param.scenario;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

TEST(KinetoAnalysis, UnmappedUserWorkIsOtherOnTheRightRank) {
  Analysis a = analyze(load({kCpu + "/slow-optimizer-rank1"}));
  ASSERT_FALSE(a.causes.empty()) << analysis_text(a);
  EXPECT_EQ(a.causes.front().rank, 1) << analysis_text(a);
}

TEST(KinetoAnalysis, BalancedRunBlamesNoRanksStage) {
  Analysis a = analyze(load({kCpu + "/balanced"}));
  EXPECT_EQ(a.world, 2);
  EXPECT_GE(a.steps, 25u);
  for (const StallCause& c : a.causes)
    if (c.rank >= 0) {
      EXPECT_LT(c.share, kDominantShare) << analysis_text(a);
    }
}

// The balanced pair was recorded by PyTorch's profiler on a 2-core machine with both ranks unpinned under the normal
// policy: a few of its Gloo allreduces take 3-6 ms with both ranks in them (Gloo's event loop spinning; see
// docs/stalls.md). The analysis flags that tail from the user's own traces, with the Gloo advice (distributedInfo
// says gloo); no planted rank stage is needed for it.
TEST(KinetoAnalysis, RealGlooTailIsFlaggedFromThePyTorchTraces) {
  Analysis a = analyze(load({kCpu + "/balanced"}));
  const StallFlag* tail = nullptr;
  for (const StallFlag& f : a.flags)
    if (f.id == "collective_tail") tail = &f;
  ASSERT_NE(tail, nullptr) << analysis_text(a);
  EXPECT_EQ(tail->rank, -1);
  EXPECT_EQ(tail->evidence["backend"], "gloo");
  EXPECT_LT(tail->evidence["median_ms"].get<double>(), 1.0);
  EXPECT_GT(tail->evidence["p90_ms"].get<double>(), 3 * tail->evidence["median_ms"].get<double>());
  EXPECT_NE(tail->message.find("SCHED_BATCH"), std::string::npos) << tail->message;
}

// The same job recorded with that advice followed (each rank on its own core, under SCHED_BATCH): no tail, and a
// shorter step than the unchanged job's.
TEST(KinetoAnalysis, RealGlooJobWithTheRemedyHasNoTail) {
  Analysis fixed = analyze(load({kCpu + "/gloo-pinned-batch"}));
  ASSERT_GE(fixed.steps, 25u);
  for (const StallFlag& f : fixed.flags) EXPECT_NE(f.id, "collective_tail") << analysis_text(fixed);
  Analysis before = analyze(load({kCpu + "/balanced"}));
  EXPECT_LT(fixed.step_ms, 0.8 * before.step_ms) << fixed.step_ms << " vs " << before.step_ms;
}

class KinetoShift : public ::testing::TestWithParam<const char*> {};

TEST_P(KinetoShift, KnownShiftIsRecoveredInsideTheBoundsAndTheVerdictHolds) {
  const std::string scenario = GetParam();
  const double shift_ms = 7.31;
  RunTrace plain = load({kCpu + "/" + scenario});
  const nlohmann::json base = kineto_report_json(plain)["clock_alignment"][1];
  const std::string d = shifted_copy(scenario, shift_ms);
  RunTrace shifted = load({d});
  const nlohmann::json est = kineto_report_json(shifted)["clock_alignment"][1];
  const double got = est["offset_ms"].get<double>();
  EXPECT_GE(est["collectives"].get<int>(), 25);
  EXPECT_NEAR(got - base["offset_ms"].get<double>(), shift_ms, 0.001) << est.dump();
  ASSERT_TRUE(est["bounds_ms"].is_array()) << est.dump();
  EXPECT_LE(est["bounds_ms"][0].get<double>(), shift_ms) << est.dump();
  EXPECT_GE(est["bounds_ms"][1].get<double>(), shift_ms) << est.dump();
  EXPECT_LE(got, est["bounds_ms"][1].get<double>() + 1e-9);
  EXPECT_GE(got, est["bounds_ms"][0].get<double>() - 1e-9);
  if (scenario == "balanced") {
    EXPECT_NEAR(got, shift_ms, est["uncertainty_ms"].get<double>()) << est.dump();
  }

  Analysis a = analyze(plain), b = analyze(shifted);
  ASSERT_FALSE(a.causes.empty());
  ASSERT_FALSE(b.causes.empty());
  EXPECT_EQ(a.causes.front().rank, b.causes.front().rank);
  EXPECT_EQ(a.causes.front().stage, b.causes.front().stage);
  EXPECT_EQ(a.verdict, b.verdict);
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(RealTraces, KinetoShift,
                         ::testing::Values("balanced", "slow-data-rank1", "slow-forward-rank0", "slow-optimizer-rank1"),
                         [](const auto& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The viewer's model of per-rank traces: every event of each rank's file, on the clock the importer measured.
namespace {

const Process* process_named(const Timeline& tl, const std::string& name) {
  for (const Process& p : tl.processes)
    if (p.name == name) return &p;
  return nullptr;
}

// Where step `step` starts in process `p` (its ProfilerStep#N span, or our step span).
int64_t step_start(const Process& p, uint32_t step) {
  for (const StepMark& m : p.steps)
    if (m.step == step) return m.t0;
  ADD_FAILURE() << p.name << " has no step " << step;
  return 0;
}

Timeline kineto_timeline(const RunTrace& run) {
  Timeline tl;
  std::string err;
  EXPECT_TRUE(timeline_from_kineto_run(run, tl, err)) << err;
  return tl;
}

}  // namespace

TEST(KinetoTimeline, EveryEventOfEveryRankOnTheMeasuredClock) {
  RunTrace run = load({kCpu + "/slow-data-rank1"});
  Timeline tl = kineto_timeline(run);
  EXPECT_EQ(tl.producer, "kineto");
  uint64_t file_spans = 0;
  const nlohmann::json report = kineto_report_json(run);
  for (const auto& f : report["files"]) {
    ChromeTrace t = read_chrome_file(f["file"].get<std::string>());
    for (const ChromeEvent& e : t.events) file_spans += e.ph == 'X' || (e.ph == 'i' && e.scope == "g");
  }
  uint64_t stage_spans = 0;
  for (const RankTrace& r : run.ranks)
    for (const Event& e : r.events) stage_spans += e.is_span();
  EXPECT_EQ(tl.span_count, file_spans + stage_spans);

  // Each rank's processes together, in rank order, its stage process first.
  std::vector<int> ranks;
  for (const Process& p : tl.processes) ranks.push_back(p.rank);
  EXPECT_TRUE(std::is_sorted(ranks.begin(), ranks.end()));
  EXPECT_EQ(ranks.front(), 0);
  EXPECT_EQ(tl.processes.front().name, "rank 0 · stages (ddp_profile)");
  for (int r = 0; r < 2; ++r) {
    const std::string R = "rank " + std::to_string(r);
    const Process* stages = process_named(tl, R + " · stages (ddp_profile)");
    const Process* cpu = process_named(tl, R + " · python3 [CPU]");
    ASSERT_TRUE(stages && cpu) << R;
    // The file's own ProfilerStep#N spans sit where the importer's step N is: one clock for both.
    for (uint32_t step : {5u, 20u}) EXPECT_EQ(step_start(*cpu, step), step_start(*stages, step)) << R;
  }
}

TEST(KinetoTimeline, AKnownClockShiftIsUndone) {
  Timeline plain = kineto_timeline(load({kCpu + "/balanced"}));
  const std::string d = shifted_copy("balanced", 7.31);
  Timeline shifted = kineto_timeline(load({d}));
  // Rank 1's steps, relative to rank 0's, are where they were before its clock moved 7.31 ms.
  auto gap = [](const Timeline& tl, uint32_t step) {
    const Process* r0 = process_named(tl, "rank 0 · python3 [CPU]");
    const Process* r1 = process_named(tl, "rank 1 · python3 [CPU]");
    if (!r0 || !r1) {
      ADD_FAILURE() << "rank processes missing";
      return int64_t{0};
    }
    return step_start(*r1, step) - step_start(*r0, step);
  };
  for (uint32_t step : {3u, 17u, 30u}) EXPECT_NEAR(gap(shifted, step), gap(plain, step), 2'000) << "step " << step;
  fs::remove_all(d);
}

TEST(KinetoImport, DamagedFileIsNamedAndTheOtherRankLoads) {
  std::string d = temp_dir("damaged");
  fs::copy_file(rank_file("balanced", 0), d + "/rank0.pt.trace.json.gz");
  std::string text;
  ASSERT_TRUE(read_chrome_bytes(rank_file("balanced", 1), text).ok());
  // Bytes overwritten in the middle (a cut-off file is read up to its cut: test_kineto_robust.cpp).
  write_text(d + "/rank1.pt.trace.json", text.substr(0, text.size() / 2) + "]]]" + text.substr(text.size() / 2 + 3));
  RunTrace run = load({d});
  ASSERT_EQ(run.ranks.size(), 1u);
  EXPECT_EQ(run.ranks[0].rank, 0u);
  std::string all;
  for (const auto& p : run.problems) all += p + "\n";
  EXPECT_NE(all.find("rank 1 not loaded: " + d + "/rank1.pt.trace.json: malformed JSON"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 1 missing"), std::string::npos) << all;
  // And a damaged file alone is an error naming it.
  EXPECT_NE(load_error({d + "/rank1.pt.trace.json"}).find("rank1.pt.trace.json"), std::string::npos);
  fs::remove_all(d);
}

TEST(KinetoImport, TwoFilesForOneRankOrDisagreeingWorldsAreErrorsNamingBoth) {
  std::string d = temp_dir("identity");
  fs::copy_file(rank_file("balanced", 0), d + "/a.json.gz");
  fs::copy_file(rank_file("balanced", 0), d + "/b.json.gz");
  std::string err = load_error({d + "/a.json.gz", d + "/b.json.gz"});
  EXPECT_NE(err.find("a.json.gz"), std::string::npos) << err;
  EXPECT_NE(err.find("b.json.gz"), std::string::npos) << err;

  nlohmann::json j = read_json_file(rank_file("balanced", 1));
  j["distributedInfo"]["world_size"] = 4;
  write_text(d + "/c.json", j.dump());
  err = load_error({d + "/a.json.gz", d + "/c.json"});
  EXPECT_NE(err.find("world sizes disagree"), std::string::npos) << err;
  EXPECT_NE(err.find("a.json.gz"), std::string::npos) << err;
  EXPECT_NE(err.find("c.json"), std::string::npos) << err;

  j.erase("distributedInfo");
  write_text(d + "/trace.json", j.dump());
  err = load_error({d + "/trace.json"});
  EXPECT_NE(err.find("trace.json"), std::string::npos) << err;
  EXPECT_NE(err.find("rank<R>"), std::string::npos) << "the error says how to name it: " << err;
  fs::remove_all(d);
}

// The legacy autograd-profiler format is a bare array of events with no distributedInfo: the rank comes from the
// file name. Built here from a real trace's events (the array the old exporter wrote holds the same events).
TEST(KinetoImport, LegacyArrayWithRankInTheFileName) {
  std::string d = temp_dir("legacy");
  for (int r = 0; r < 2; ++r) {
    nlohmann::json j = read_json_file(rank_file("slow-forward-rank0", r));
    write_text(d + "/legacy_rank_" + std::to_string(r) + ".json", j["traceEvents"].dump());
  }
  RunTrace run = load({d});
  ASSERT_EQ(run.ranks.size(), 2u);
  EXPECT_EQ(kineto_report_json(run)["files"][1]["rank_from"], "file name");
  EXPECT_EQ(kineto_report_json(run)["files"][1]["format"], "legacy array");
  Analysis a = analyze(run);
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 0) << analysis_text(a);
  EXPECT_EQ(a.causes.front().stage, "forward") << analysis_text(a);
  fs::remove_all(d);
}

// A real legacy pair: Debian's PyTorch 1.13 (built without Kineto) writes export_chrome_trace as a bare array, with
// each process's own relative timestamps and no distributedInfo. The ranks come from the file names, the clocks from
// the matched collectives, and rank 1's slow Dataset is found.
TEST(KinetoImport, RealLegacyTracesOfPyTorch113) {
  RunTrace run = load({kData + "/pytorch-1.13-legacy/slow-data-rank1"});
  ASSERT_EQ(run.ranks.size(), 2u);
  const nlohmann::json report = kineto_report_json(run);
  EXPECT_EQ(report["files"][0]["format"], "legacy array");
  EXPECT_EQ(report["files"][1]["rank_from"], "file name");
  Analysis a = analyze(run);
  ASSERT_FALSE(a.causes.empty()) << analysis_text(a);
  EXPECT_EQ(a.causes.front().rank, 1) << analysis_text(a);
  EXPECT_EQ(a.causes.front().stage, "wait_data") << analysis_text(a);
}

TEST(KinetoImport, HtaFixturesLoad) {
  RunTrace gpu = load({kData + "/alexnet_1gpu_kineto.json.gz"});
  ASSERT_EQ(gpu.ranks.size(), 1u);
  EXPECT_GT(count(gpu.ranks[0], Stage::kernel), 50u);
  EXPECT_EQ(count(gpu.ranks[0], Stage::memcpy_h2d), 16u);
  EXPECT_GT(count(gpu.ranks[0], Stage::sync), 0u);
  analyze(gpu);
  summarize(gpu);

  RunTrace cpu = load({kData + "/cpu_only_kineto.json.gz"});
  ASSERT_EQ(cpu.ranks.size(), 1u);
  EXPECT_EQ(cpu.ranks[0].rank, 34u);
  // One ProfilerStep window: the collectives outside it are left out, and the notes say so.
  EXPECT_GE(count(cpu.ranks[0], Stage::allreduce), 1u);
  EXPECT_NE(kineto_report_json(cpu)["notes"].dump().find("outside every ProfilerStep window"), std::string::npos);
  std::string all;
  for (const auto& p : cpu.problems) all += p;
  EXPECT_NE(all.find("ranks 0-33, 35-299 missing"), std::string::npos) << all;
  analyze(cpu);
}

// HolisticTraceAnalysis's NCCL traces (tests/data/README.md): one rank of a 2-GPU DDP job, and two ranks sampled
// from a 128-GPU job. They load, align, analyse and export; the NCCL kernels are classified.
TEST(KinetoImport, HtaNcclTracesLoadAlignAnalyseAndExport) {
  RunTrace one = load({kData + "/hta/nccl_data.json.gz"});
  ASSERT_EQ(one.ranks.size(), 1u);
  EXPECT_EQ(count(one.ranks[0], Stage::nccl), 21u);  // 15 AllReduce + 6 Broadcast kernels, ncclKernel_*
  EXPECT_GT(count(one.ranks[0], Stage::kernel), 1000u);
  EXPECT_EQ(count(one.ranks[0], Stage::memcpy_d2d), 960u);  // Memcpy DtoD (Device -> Device)
  uint64_t bytes = 0;
  for (const Event& e : one.ranks[0].events)
    if (e.stage_id() == Stage::allreduce) bytes += e.value;
  EXPECT_GT(bytes, 0u) << "sizes come from record_param_comms around nccl:all_reduce";
  // On a GPU the host only enqueues the allreduce: its span is the AllReduce kernel's, on the kernel's stream.
  for (const Event& e : one.ranks[0].events)
    if (e.stage_id() == Stage::allreduce) {
      EXPECT_EQ(one.ranks[0].lane_name(e.lane).rfind("stream", 0), 0u) << one.ranks[0].lane_name(e.lane);
    }
  std::string all;
  for (const auto& p : one.problems) all += p;
  EXPECT_NE(all.find("rank 1 missing"), std::string::npos) << all;
  analyze(one);

  RunTrace two = load({kData + "/hta/sampled_rank-0.json.gz", kData + "/hta/sampled_rank-1.json.gz"});
  ASSERT_EQ(two.ranks.size(), 2u);
  EXPECT_EQ(two.ranks[1].world, 128u);
  for (const RankTrace& r : two.ranks) EXPECT_EQ(count(r, Stage::nccl), 10u);  // ncclKernel_SendRecv_*
  const nlohmann::json align = kineto_report_json(two)["clock_alignment"];
  EXPECT_TRUE(align[1]["measured"].get<bool>()) << align.dump();
  Analysis a = analyze(two);
  EXPECT_EQ(a.world, 128);
  std::string d = temp_dir("hta_export");
  ExportStats st;
  std::string err;
  ASSERT_TRUE(export_chrome(two, d + "/merged.json", st, err)) << err;
  ChromeTrace t = read_chrome_file(d + "/merged.json");
  ASSERT_TRUE(t.ok()) << t.status.message;
  size_t nccl_named = 0;
  for (const ChromeEvent& e : t.events) nccl_named += e.ph == 'X' && e.name.rfind("ncclKernel_SendRecv", 0) == 0;
  EXPECT_EQ(nccl_named, 20u) << "kernels keep their names in the export";
  EXPECT_GT(st.flows, 0u) << "launch arrows kept";
  fs::remove_all(d);
}
