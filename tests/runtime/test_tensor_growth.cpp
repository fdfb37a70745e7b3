// memory.steady on a user's script, where the companion counted the live tensors (runtime/check/tensor_growth.h):
// a graph kept alive fails whatever the bytes say, detached tensors that outlive an epoch fail and those gathered
// within one warn, a count that falls at each epoch's end is no leak, and bytes that grow while the tensors do not
// are a warning with where the rate leads, never a fail.
#include <gtest/gtest.h>

#include "runtime/check/judges.h"
#include "runtime/check/tensor_growth.h"

namespace {
using ddp::CheckStatus;
using ddp::TrainingEvidence;
using ddp::TrainingStep;

// The counts a census sees at `step`, holders named as the companion names them once they grow.
using Counts = std::function<ddp::records::tensor_census(int64_t step)>;

ddp::records::tensor_census census(int64_t epoch, int64_t tensors, int64_t nodes,
                                   std::vector<ddp::records::tensor_holder> holders = {}) {
  ddp::records::tensor_census c;
  c.epoch = epoch, c.tensors = tensors, c.tensor_bytes = tensors * 1024, c.graph_nodes = nodes;
  c.holders = std::move(holders);
  return c;
}

ddp::records::tensor_holder holder(int64_t id, const char* kind, const char* name, int64_t count) {
  ddp::records::tensor_holder h;
  h.id = id, h.kind = kind, h.name = name, h.count = count;
  return h;
}

// 64 steps of 2 ranks with a flat heap (plus `heap_per_step`), 16 steps an epoch, a census every 6th step from step 4
// (warm-up is the run's first tenth: the censuses from step 10 on are judged, 9 of them).
TrainingEvidence run(const Counts& counts, int64_t heap_per_step = 0) {
  TrainingEvidence e;
  for (int r = 0; r < 2; ++r) {
    std::vector<TrainingStep> v;
    for (int64_t s = 0; s < 64; ++s) {
      TrainingStep t;
      t.step = s;
      t.rss = 400'000'000;
      t.heap = 150'000'000 + heap_per_step * s;
      if (s >= 4 && s % 6 == 4) t.census = counts(s);
      v.push_back(t);
    }
    e.per_rank.push_back(v);
  }
  return e;
}

TEST(TensorGrowth, AGraphKeptAliveFailsNamingWhereItIsHeld) {
  auto r = ddp::judge_memory(run([](int64_t s) {
    return census(s / 16, 40, 30 + 26 * s, {holder(7, "list", "", 3), holder(s, "graph", "global `running`", 26 * s)});
  }));
  EXPECT_EQ(r.status, CheckStatus::fail) << r.summary;
  EXPECT_NE(r.summary.find("rank 0 keeps autograd graphs alive: the nodes its live tensors reach grow 26.0 per step"),
            std::string::npos)
      << r.summary;
  EXPECT_NE(r.summary.find("the largest graph held at global `running`"), std::string::npos) << r.summary;
}

TEST(TensorGrowth, DetachedTensorsFailAcrossAnEpochAndWarnWithinOne) {
  const Counts cache = [](int64_t s) { return census(s / 16, 40 + s, 30, {holder(9, "dict", "global `cache`", s)}); };
  auto r = ddp::judge_memory(run(cache));
  EXPECT_EQ(r.status, CheckStatus::fail) << r.summary;
  EXPECT_NE(r.summary.find("rank 0's live tensors grow 1.0 per step"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("held in a dict at global `cache` (10 -> 58 tensors), on from epoch 0 into 3"),
            std::string::npos)
      << r.summary;
  // The same growth inside one epoch: outputs gathered for its metric may be released at its end.
  auto within = ddp::judge_memory(run([&](int64_t s) {
    auto c = cache(s);
    c.epoch = 0;
    return c;
  }));
  EXPECT_EQ(within.status, CheckStatus::warn) << within.summary;
  EXPECT_NE(within.summary.find("within epoch 0: released at the epoch's end"), std::string::npos) << within.summary;
  // Released at each epoch's end: the count falls, no leak.
  auto released = ddp::judge_memory(run([](int64_t s) { return census(s / 16, 40 + s % 16, 30); }));
  EXPECT_EQ(released.status, CheckStatus::pass) << released.summary;
}

TEST(TensorGrowth, BytesGrowingWithSteadyTensorsWarnWithTheirProjection) {
  const Counts steady = [](int64_t s) { return census(s / 16, 40, 30, {holder(7, "list", "", 3)}); };
  auto r = ddp::judge_memory(run(steady, 14'000));  // a correct script written elsewhere crept 14 KB a step
  EXPECT_EQ(r.status, CheckStatus::warn) << r.summary;
  EXPECT_NE(r.summary.find("rank 0's heap in use grows 14 KB per step"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("while its live tensors do not (40 over 9 censuses)"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("+140.0 MB over 10 000 steps"), std::string::npos) << r.summary;
  auto flat = ddp::judge_memory(run(steady));
  EXPECT_EQ(flat.status, CheckStatus::pass) << flat.summary;
  EXPECT_NE(flat.summary.find("live tensors steady (40 on rank 0 over 9 censuses)"), std::string::npos) << flat.summary;
}

// The seed job keeps its checkpoint's state after saving it: +5 tensors once, then flat. A history of one tensor a
// pass grows with the epochs, not the steps.
TEST(TensorGrowth, ARiseOnceOrOncePerPassIsNoLeak) {
  auto once = ddp::judge_memory(run([](int64_t s) { return census(s / 16, s < 40 ? 27 : 32, 12); }));
  EXPECT_EQ(once.status, CheckStatus::pass) << once.summary;
  auto per_pass = ddp::judge_memory(run([](int64_t s) { return census(s / 16, 27 + s / 16, 12); }));
  EXPECT_EQ(per_pass.status, CheckStatus::pass) << per_pass.summary;
}

TEST(TensorGrowth, TwoCensusesCannotShowATrend) {
  TrainingEvidence e = run([](int64_t s) { return census(0, 40 + s, 30); });
  for (auto& rank : e.per_rank) {
    int kept = 0;
    for (auto& t : rank)
      if (t.census && ++kept > 2) t.census.reset();
  }
  EXPECT_EQ(ddp::tensor_growth(e.per_rank[0], 4).censuses, 2u);
  EXPECT_FALSE(ddp::tensor_growth(e.per_rank[0], 4).grows());
}

}  // namespace
