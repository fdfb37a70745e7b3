// Stall analysis on synthetic runs (tests/traces/analysis/analysis_sim.h): flags, degenerate runs and the JSON: each
// test plants one pattern and checks what analyze() names, and that a balanced run names nothing.
#include "tests/traces/analysis/analysis_sim.h"

using namespace analysis_test;

TEST(Analysis, AccumulationCausesAndSyncEveryMicroStepFlag) {
  Sim sim;
  sim.accum = 4;
  sim.rank[1].transform += 30;  // 32.5 ms / 2 workers per batch vs ~6.5 ms of compute per micro-step
  ddp::Analysis a = run_analysis(sim, "accum");
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 1) << describe(a);
  EXPECT_EQ(a.causes.front().stage, "transform") << describe(a);
  EXPECT_NEAR(a.ranks[0].micro_steps, 4.0, 1e-9);
  EXPECT_FALSE(has_flag(a, "sync_every_micro_step")) << describe(a);

  Sim every;
  every.accum = 4;
  every.sync_every_step = true;
  ddp::Analysis b = run_analysis(every, "accum_every");
  EXPECT_TRUE(has_flag(b, "sync_every_micro_step", 0)) << describe(b);
  EXPECT_TRUE(has_flag(b, "sync_every_micro_step", 1)) << describe(b);
  EXPECT_NEAR(b.ranks[0].allreduce.syncs_per_step, 4.0, 1e-9);

  // Also found without a manifest (accumulation inferred from the micro-steps).
  every.manifest = false;
  ddp::Analysis c = run_analysis(every, "accum_every_nomanifest");
  EXPECT_TRUE(has_flag(c, "sync_every_micro_step", 0)) << describe(c);
  // And a correct accumulation without a manifest (a user's traces) is not flagged.
  sim.manifest = false;
  ddp::Analysis d = run_analysis(sim, "accum_nomanifest");
  EXPECT_FALSE(has_flag(d, "sync_every_micro_step")) << describe(d);
}

TEST(Analysis, PageableH2dFlag) {
  Sim sim;
  sim.pinned = false;
  ddp::Analysis a = run_analysis(sim, "pageable");
  EXPECT_TRUE(has_flag(a, "pageable_h2d", 0));
  EXPECT_TRUE(has_flag(a, "pageable_h2d", 1));

  // No manifest: low H2D bandwidth (4 MiB in 3 ms = 1.4 GB/s) taking a visible share of the step.
  Sim slow;
  slow.manifest = false;
  for (auto& r : slow.rank) r.h2d = 3;
  ddp::Analysis b = run_analysis(slow, "pageable_bw");
  EXPECT_TRUE(has_flag(b, "pageable_h2d", 0)) << describe(b);

  // Fast copies without a manifest stay silent (the balanced run's 8 GB/s).
  Sim fast;
  fast.manifest = false;
  ddp::Analysis c = run_analysis(fast, "pinned_bw");
  EXPECT_FALSE(has_flag(c, "pageable_h2d")) << describe(c);
}

TEST(Analysis, TinyBucketsFlag) {
  Sim sim;
  sim.buckets = 16;
  sim.bucket_bytes = 64 << 10;
  sim.comm_ms = 0.1;
  ddp::Analysis a = run_analysis(sim, "tiny");
  EXPECT_TRUE(has_flag(a, "tiny_buckets", 0)) << describe(a);
  EXPECT_TRUE(has_flag(a, "tiny_buckets", 1));
  // A small model in one bucket is not "tiny buckets".
  Sim one;
  one.buckets = 1;
  one.bucket_bytes = 200 << 10;
  EXPECT_FALSE(has_flag(run_analysis(one, "one_bucket"), "tiny_buckets"));
}

// A quarter of the steps' collectives take 4 ms longer with every rank present (what Gloo's event-loop spin looks
// like): flagged, with the Gloo advice when the manifest says gloo. A peer that is late now and then makes the other
// rank's allreduce spans just as long, but that is waiting, not the collective: no flag. Nor in a balanced run.
TEST(Analysis, CollectiveTailFlag) {
  Sim sim;
  sim.steps = 40;
  sim.buckets = 1;
  sim.comm_tail_ms = 4;
  sim.comm_tail_every = 4;
  sim.backend = "gloo";
  ddp::Analysis a = run_analysis(sim, "comm_tail");
  ASSERT_TRUE(has_flag(a, "collective_tail", -1)) << describe(a);
  for (const auto& f : a.flags)
    if (f.id == "collective_tail") {
      EXPECT_NEAR(f.evidence["median_ms"].get<double>(), 0.3, 0.05);
      EXPECT_NEAR(f.evidence["p90_ms"].get<double>(), 4.3, 0.1);
      EXPECT_NE(f.message.find("SCHED_BATCH"), std::string::npos) << f.message;
      EXPECT_EQ(f.message.find("NCCL"), std::string::npos) << "the manifest says gloo: " << f.message;
    }

  Sim late = sim;
  late.comm_tail_ms = 0;
  late.rank[1].late_ms = 4;
  late.rank[1].late_every = 4;
  ddp::Analysis b = run_analysis(late, "comm_late_peer");
  EXPECT_FALSE(has_flag(b, "collective_tail")) << describe(b);

  Sim balanced;
  balanced.steps = 40;
  EXPECT_FALSE(has_flag(run_analysis(balanced, "comm_balanced"), "collective_tail"));
}

TEST(Analysis, MemoryGrowthFlag) {
  Sim sim;
  sim.rank[1].rss_growth_mb_per_step = 15;  // +285 MiB over 20 steps on 1000 MiB
  ddp::Analysis a = run_analysis(sim, "memgrowth");
  EXPECT_TRUE(has_flag(a, "memory_growth", 1)) << describe(a);
  EXPECT_FALSE(has_flag(a, "memory_growth", 0));
  // A warm-up jump that then stays flat is not growth; nor is a slow creep under the thresholds.
  Sim flat;
  flat.rank[0].rss_warmup_mb = 400;
  flat.rank[1].rss_growth_mb_per_step = 1;
  ddp::Analysis b = run_analysis(flat, "memflat");
  EXPECT_FALSE(has_flag(b, "memory_growth")) << describe(b);
}

TEST(Analysis, IncompleteTraceAndDroppedEventsFlags) {
  Sim sim;
  sim.complete = false;
  ddp::Analysis a = run_analysis(sim, "incomplete");
  EXPECT_TRUE(has_flag(a, "trace_incomplete", 0));
  EXPECT_FALSE(a.ranks[0].complete);
  EXPECT_FALSE(has_flag(a, "events_dropped"));
  Sim dropped;
  dropped.dropped = 17;
  ddp::Analysis b = run_analysis(dropped, "dropped");
  EXPECT_TRUE(has_flag(b, "events_dropped", 1));
  EXPECT_FALSE(has_flag(b, "trace_incomplete"));
}

TEST(Analysis, StepsAreDerivedWhenStepSpansAreMissing) {
  Sim sim;
  sim.step_spans = false;
  sim.rank[0].backward += 10;
  ddp::Analysis a = run_analysis(sim, "nosteps");
  EXPECT_EQ(a.steps, 19u);
  ASSERT_FALSE(a.causes.empty());
  EXPECT_EQ(a.causes.front().rank, 0);
  EXPECT_EQ(a.causes.front().stage, "backward");
}

TEST(Analysis, SingleRankAndEmptyRunsDoNotBreak) {
  Sim one;
  one.world = 1;
  one.rank = std::vector<RankKnobs>(1);
  ddp::Analysis a = run_analysis(one, "single");
  EXPECT_EQ(a.world, 1);
  EXPECT_EQ(a.steps, 19u);
  EXPECT_NEAR(a.ranks[0].allreduce.busbw_gbps, 0.0, 1e-12);
  EXPECT_NEAR(a.ranks[0].skew_ms, 0.0, 1e-12);

  ddp::RunTrace empty;
  ddp::Analysis b = ddp::analyze(empty);
  EXPECT_EQ(b.steps, 0u);
  EXPECT_EQ(b.verdict, "no complete steps to analyse");
  EXPECT_NO_THROW(ddp::analysis_text(b));
  EXPECT_TRUE(ddp::analysis_json(b)["causes"].empty());
}

TEST(Analysis, JsonSchemaIsStable) {
  Sim sim;
  sim.rank[1].transform += 60;
  sim.pinned = false;
  ddp::Analysis a = run_analysis(sim, "schema");
  nlohmann::json j = ddp::analysis_json(a);
  // Round trip through text, as a tool would read it.
  j = nlohmann::json::parse(j.dump());
  EXPECT_EQ(j.at("schema"), "ddp_profile.analysis/1");
  for (const char* k :
       {"world_size", "steps", "warmup_steps", "step_ms", "verdict", "causes", "flags", "ranks", "problems"})
    EXPECT_TRUE(j.contains(k)) << k;
  ASSERT_GE(j["causes"].size(), 1u);
  double prev = 1e300;
  for (const auto& c : j["causes"]) {
    for (const char* k : {"rank", "stage", "lost_ms", "lost_ms_per_step", "share", "victims", "evidence", "explanation",
                          "at_ns", "at_rank", "at_step"})
      EXPECT_TRUE(c.contains(k)) << k;
    EXPECT_TRUE(c["evidence"].is_object());
    EXPECT_LE(c["lost_ms"].get<double>(), prev);
    prev = c["lost_ms"].get<double>();
    for (const auto& v : c["victims"]) {
      EXPECT_TRUE(v["rank"].is_number_integer());
      EXPECT_TRUE(v["stage"] == "wait_data" || v["stage"] == "wait_comm");
      EXPECT_TRUE(v["ms"].is_number());
    }
  }
  EXPECT_EQ(j["causes"][0]["rank"], 1);
  EXPECT_EQ(j["causes"][0]["stage"], "transform");
  for (const auto& f : j["flags"]) {
    for (const char* k : {"id", "rank", "message", "evidence"}) EXPECT_TRUE(f.contains(k)) << k;
  }
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& r : j["ranks"]) {
    for (const char* k : {"rank", "steps", "step_ms", "stages_ms_per_step", "wait_data_ms", "wait_comm_ms",
                          "overlap_pct", "allreduce", "skew_ms", "h2d_gbps", "loader", "micro_steps"})
      EXPECT_TRUE(r.contains(k)) << k;
    for (const char* k : {"bytes_per_step", "algbw_gbps", "busbw_gbps", "count_per_step", "time_ms_per_step"})
      EXPECT_TRUE(r["allreduce"].contains(k)) << k;
    EXPECT_TRUE(r["stages_ms_per_step"].contains("forward"));
  }
  std::string text = ddp::analysis_text(a);
  size_t causes = text.find("causes"), flags = text.find("flags:"), ranks = text.find("ranks:");
  ASSERT_NE(causes, std::string::npos);
  EXPECT_LT(causes, flags);
  EXPECT_LT(flags, ranks);
  EXPECT_NE(text.find("rank 1 transform"), std::string::npos) << text;
  EXPECT_NE(text.find("[pageable_h2d]"), std::string::npos) << text;
}
