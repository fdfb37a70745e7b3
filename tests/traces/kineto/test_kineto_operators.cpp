// The profiler's operators in a rank's untracked main-thread time (traces/kineto/kineto_operators.h) and the sentence
// they go into (name_untracked_operators, traces/analysis/analysis.h), on a trace written here event by event.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kineto_test_files.h"
#include "traces/analysis/analysis.h"
#include "traces/kineto/kineto_operators.h"

namespace {

// A Kineto event: ts and dur in milliseconds (written in microseconds, as Kineto does).
std::string ev(const std::string& name, const std::string& cat, double ts_ms, double dur_ms, int tid = 1) {
  return "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name +
         "\", \"pid\": 7, \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts_ms * 1000) +
         ", \"dur\": " + std::to_string(dur_ms * 1000) + "}";
}

std::string write_trace(const std::string& name) {
  const std::string events[] = {
      // Step 1: the batch (the DataLoader's __next__ waits until its first operator, then rebuilds the batch on the
      // main thread), host work under a record_function, the forward, the optimizer.
      ev("ProfilerStep#1", "user_annotation", 0, 10),
      ev("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", 0, 2),
      ev("aten::stack", "cpu_op", 0.5, 1.5),
      ev("prep", "user_annotation", 2, 3),
      ev("aten::sin", "cpu_op", 2.5, 2),
      ev("DistributedDataParallel.forward", "user_annotation", 5, 3),
      ev("aten::linear", "cpu_op", 5.5, 2),
      ev("Optimizer.step#AdamW.step", "user_annotation", 8, 1.5),
      ev("aten::add_", "cpu_op", 8.2, 1),
      // Step 2: a copy between the batch and the backward; the backward's operators are a stage's.
      ev("ProfilerStep#2", "user_annotation", 10, 10),
      ev("aten::copy_", "cpu_op", 10, 3),
      ev("autograd::engine::evaluate_function: AddmmBackward0", "cpu_op", 13, 3),
      ev("aten::mm", "cpu_op", 13.5, 2),
      // Outside every step, and on another thread: not the steps' untracked time.
      ev("aten::randn", "cpu_op", 20.5, 4),
      ev("aten::mm", "cpu_op", 0, 10, 2),
  };
  std::string json = "{\"traceEvents\": [";
  for (size_t i = 0; i < std::size(events); ++i) json += (i ? ",\n" : "\n") + events[i];
  json += "\n]}";
  const std::string path = ddptest::kineto_temp_dir(name) + "/rank1.pt.trace.json";
  std::ofstream(path) << json;
  return path;
}

TEST(KinetoOperators, EachOperatorsOwnTimeOutsideTheStagesInsideTheSteps) {
  ddp::KinetoStageMap map;
  ddp::KinetoUntrackedOperators found;
  std::string err;
  ASSERT_TRUE(ddp::kineto_untracked_operators(write_trace("own_time"), map, found, err)) << err;
  EXPECT_EQ(found.steps, 2u);
  ASSERT_EQ(found.operators.size(), 4u);
  const std::pair<const char*, double> expected[] = {
      {"aten::copy_", 3}, {"aten::sin", 2}, {"aten::stack", 1.5}, {"prep", 1}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(found.operators[i].name, expected[i].first);
    EXPECT_NEAR(found.operators[i].untracked_ns / 1e6, expected[i].second, 1e-6) << expected[i].first;
    EXPECT_EQ(found.operators[i].calls, 1u) << expected[i].first;
  }
  EXPECT_NEAR(found.untracked_ns / 1e6, 7.5, 1e-6);
}

TEST(KinetoOperators, AUserMapRuleMakesItsSpanAStage) {
  ddp::KinetoStageMap map;
  std::string err;
  ASSERT_TRUE(map.add_user_rule("^prep$=transform", err)) << err;
  ddp::KinetoUntrackedOperators found;
  ASSERT_TRUE(ddp::kineto_untracked_operators(write_trace("mapped"), map, found, err)) << err;
  for (const auto& o : found.operators) EXPECT_TRUE(o.name != "prep" && o.name != "aten::sin") << o.name;
}

TEST(KinetoOperators, AnUnreadableTraceIsAnErrorAndNoStepsIsNothing) {
  ddp::KinetoStageMap map;
  ddp::KinetoUntrackedOperators found;
  std::string err;
  const std::string dir = ddptest::kineto_temp_dir("unreadable");
  std::ofstream(dir + "/bad.json") << "{\"traceEvents\": [{\"ph\": ";
  std::ofstream(dir + "/nosteps.json") << "{\"traceEvents\": [" << ev("aten::mm", "cpu_op", 0, 1) << "]}";
  EXPECT_FALSE(ddp::kineto_untracked_operators(dir + "/missing.json", map, found, err));
  EXPECT_FALSE(err.empty());
  err.clear();
  EXPECT_FALSE(ddp::kineto_untracked_operators(dir + "/bad.json", map, found, err));
  EXPECT_FALSE(err.empty());
  ASSERT_TRUE(ddp::kineto_untracked_operators(dir + "/nosteps.json", map, found, err)) << err;
  EXPECT_EQ(found.steps, 0u);
  EXPECT_TRUE(found.operators.empty());
}

TEST(KinetoOperators, TheUntrackedCauseOfThatRankNamesThemAndNoOtherCause) {
  ddp::Analysis a;
  ddp::StallCause untracked;
  untracked.rank = 1;
  untracked.stage = ddp::kUntrackedCauseName;
  untracked.explanation = "rank 1 spends 7.50 ms/step in untracked main-thread time";
  ddp::StallCause other_rank = untracked;
  other_rank.rank = 0;
  ddp::StallCause forward = untracked;
  forward.stage = "forward";
  a.causes = {untracked, other_rank, forward};
  const std::vector<ddp::UntrackedOperator> ops = {{"aten::copy_", 1.5, 0.5}, {"aten::sin", 1.0, 0.5}};
  ddp::name_untracked_operators(a, 1, ops, 2, "rank1.pt.trace.json");
  EXPECT_EQ(a.causes[0].explanation,
            "rank 1 spends 7.50 ms/step in untracked main-thread time; in rank1.pt.trace.json's 2 steps the "
            "profiler's operators take 2.50 ms/step of it: aten::copy_ 1.50, aten::sin 1.00");
  ASSERT_EQ(a.causes[0].evidence["operators"].size(), 2u);
  EXPECT_EQ(a.causes[0].evidence["operators"][0]["name"], "aten::copy_");
  EXPECT_EQ(a.causes[1].explanation, untracked.explanation);
  EXPECT_EQ(a.causes[2].explanation, untracked.explanation);
  EXPECT_TRUE(a.causes[1].evidence.is_null() || !a.causes[1].evidence.contains("operators"));
}

}  // namespace
