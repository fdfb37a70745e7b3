// Run diff, tensors and replicas: where two runs first diverge (step, layer, kind, rank), with tolerances.
// Every check comes with its planted difference: the same assertion on the unchanged pair must come out the other way.
#include "tests/traces/diff/run_diff_support.h"

using namespace run_diff_test;

namespace {

// ---- tensors -----------------------------------------------------------------------------------------------------

TEST(RunDiffTensors, IdenticalRunsDoNotDivergeAPlantedChangeIsFoundAtItsStepLayerAndKind) {
  TensorPair p;
  p.write(p.ra0, p.ra1);
  auto d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.compared);
  EXPECT_FALSE(d.tensors.first.has_value());
  ASSERT_EQ(d.tensors.ranks.size(), 2u);
  EXPECT_EQ(d.tensors.ranks[0].compared, p.ra0.size());
  EXPECT_EQ(d.tensors.ranks[0].identical, p.ra0.size());
  EXPECT_NE(ddp::run_diff_text(d).find("no divergence"), std::string::npos);

  // Planted: at step 1 the fc2 activation's std grows 1% (and so its hash); later records change too.
  auto b0 = p.ra0;
  Rec& r = find(b0, 1, "activation", "fc2", 0);
  r.std *= 1.01;
  r.hash = "changed";
  Rec& later = find(b0, 2, "param", "fc1.weight");
  later.mean *= 2;
  later.hash = "changed too";
  p.write(b0, p.ra1);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  const auto& f = *d.tensors.first;
  EXPECT_EQ(f.rank, 0);
  EXPECT_EQ(f.step, 1);
  EXPECT_EQ(f.kind, "activation");
  EXPECT_EQ(f.micro, 0);
  EXPECT_EQ(f.name, "fc2");
  EXPECT_EQ(f.reason, "std");
  EXPECT_NE(f.hint.find("earlier layers matched"), std::string::npos) << f.hint;
  EXPECT_NEAR(f.rel_std, 0.01 / 1.01, 1e-9);
  EXPECT_NEAR(f.b["std"].get<double>() / f.a["std"].get<double>(), 1.01, 1e-12);
  EXPECT_EQ(d.tensors.ranks[0].diverged, 2u);
  EXPECT_FALSE(d.tensors.ranks[1].first_divergence.has_value());
  std::string text = ddp::run_diff_text(d);
  EXPECT_NE(text.find("first diverge at step 1, activation (micro 0) fc2 (rank 0)"), std::string::npos) << text;
}

TEST(RunDiffTensors, TheEarliestRankAndTheOrderInsideAStepDecide) {
  TensorPair p;
  auto b0 = p.ra0, b1 = p.ra1;
  // Rank 0 diverges at step 1 (a param), rank 1 at step 0 in fc2.bias's gradient and, later in file order, nothing.
  Rec& x = find(b0, 1, "param", "fc1.bias");
  x.l2 *= 1.5;
  x.hash = "x";
  Rec& y = find(b1, 0, "grad", "fc2.bias");
  y.mean = -y.mean;
  y.hash = "y";
  p.write(b0, b1);
  auto d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->rank, 1);
  EXPECT_EQ(d.tensors.first->step, 0);
  EXPECT_EQ(d.tensors.first->kind, "grad");
  EXPECT_EQ(d.tensors.first->name, "fc2.bias");
  EXPECT_EQ(d.tensors.first->micro, -1);
  ASSERT_TRUE(d.tensors.ranks[0].first_divergence.has_value());
  EXPECT_EQ(d.tensors.ranks[0].first_divergence->step, 1);
  EXPECT_EQ(d.tensors.ranks[0].first_divergence->reason, "l2");
  EXPECT_NE(d.tensors.ranks[0].first_divergence->hint.find("optimizer update"), std::string::npos);
  EXPECT_NE(d.tensors.first->hint.find("gradients differ"), std::string::npos);

  // Within one step the parameters come before the activations, which come before the gradients.
  b1 = p.ra1;
  Rec& g = find(b1, 0, "grad", "fc1.weight");
  g.std *= 2;
  g.hash = "g";
  Rec& a = find(b1, 0, "activation", "relu", 0);
  a.mean += a.std;  // a shift of one standard deviation
  a.hash = "a";
  p.write(p.ra0, b1);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->kind, "activation");
  EXPECT_EQ(d.tensors.first->name, "relu");
  EXPECT_EQ(d.tensors.first->reason, "mean");

  // A sum-reduced loss on two ranks: every gradient is twice the mean-reduced one; the hint shows the ratio.
  b1 = p.ra1;
  for (auto& rec : b1)
    if (rec.kind == "grad") {
      rec.mean *= 2, rec.std *= 2, rec.l2 *= 2;
      rec.hash += "x2";
    }
  p.write(p.ra0, b1);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->kind, "grad");
  EXPECT_EQ(d.tensors.first->name, "fc1.weight");
  EXPECT_NE(d.tensors.first->hint.find("l2 ratio B/A 2;"), std::string::npos) << d.tensors.first->hint;

  // The first activation of a micro-step diverging points at the input batch.
  b1 = p.ra1;
  Rec& in = find(b1, 0, "activation", "fc1", 0);
  in.mean += in.std;
  in.hash = "input";
  p.write(p.ra0, b1);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_NE(d.tensors.first->hint.find("input batch"), std::string::npos) << d.tensors.first->hint;
}

TEST(RunDiffTensors, ToleranceIsRelativeAndHashesDecideIdentity) {
  TensorPair p;
  auto b0 = p.ra0;
  // A rounding-size change (different hash, relative 1e-7) is within tolerance but is the first bitwise difference.
  Rec& r = find(b0, 0, "grad", "fc1.weight");
  r.l2 *= 1 + 1e-7;
  r.std *= 1 + 1e-7;
  r.hash = "rounded";
  // A mean that is ~0 moving by 1e-9 is tiny next to the tensor's RMS: within tolerance.
  Rec& z = find(b0, 1, "param", "fc2.bias");
  z.mean = 1e-12;
  Rec& za = find(p.ra0, 1, "param", "fc2.bias");
  za.mean = 1e-9;
  z.hash = "near zero";
  // Equal hashes win even if the numbers were written differently.
  Rec& same = find(b0, 2, "param", "fc1.weight");
  same.mean *= 3;
  p.write(b0, p.ra1);
  auto d = diff_dirs(p.a, p.b);
  EXPECT_FALSE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.ranks[0].within_tolerance, 2u);
  ASSERT_TRUE(d.tensors.ranks[0].first_hash_difference.has_value());
  EXPECT_EQ(d.tensors.ranks[0].first_hash_difference->step, 0);
  EXPECT_EQ(d.tensors.ranks[0].first_hash_difference->name, "fc1.weight");

  // Planted: the same changes diverge under a tighter tolerance, and a 1e-3 change diverges at the default one.
  ddp::DiffOptions tight;
  tight.rtol = 1e-8;
  d = diff_dirs(p.a, p.b, tight);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->step, 0);
  EXPECT_EQ(d.tensors.first->name, "fc1.weight");
  r.l2 *= 1 + 1e-3;
  p.write(b0, p.ra1);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->reason, "l2");
}

TEST(RunDiffTensors, ShapeChangesAndNonFiniteValuesDiverge) {
  TensorPair p;
  auto b1 = p.ra1;
  Rec& c = find(b1, 0, "activation", "fc1", 0);
  c.count /= 2;  // half the batch
  c.hash = "half";
  p.write(p.ra0, b1);
  auto d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->reason, "count");
  EXPECT_NE(d.tensors.first->hint.find("shape differs"), std::string::npos);
  EXPECT_EQ(d.tensors.first->name, "fc1");

  b1 = p.ra1;
  Rec& n = find(b1, 2, "grad", "fc2.weight");
  n.mean = std::nan("");
  n.std = std::nan("");
  n.l2 = std::nan("");
  n.hash = "nan";
  p.write(p.ra0, b1);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.first->step, 2);
  EXPECT_EQ(d.tensors.first->reason.rfind("not finite", 0), 0u) << d.tensors.first->reason;
  json j = ddp::run_diff_json(d);
  EXPECT_TRUE(j["tensors"]["first_divergence"]["rel"]["mean"].is_null());
  EXPECT_TRUE(json::parse(j.dump()).is_object());  // still valid JSON
}

TEST(RunDiffTensors, RecordsInOneRunOnlyAreCountedNotDiverged) {
  TensorPair p;
  // B ran two micro-steps per step and dumped one step more.
  auto b0 = base_records(4, 2);
  p.write(b0, base_records(3));
  auto d = diff_dirs(p.a, p.b);
  EXPECT_FALSE(d.tensors.first.has_value());
  EXPECT_EQ(d.tensors.ranks[0].only_a, 0u);
  EXPECT_EQ(d.tensors.ranks[0].only_b, b0.size() - p.ra0.size());
  EXPECT_EQ(d.tensors.ranks[0].compared, p.ra0.size());
  // Planted: without summaries on one side nothing is compared, and the diff says why.
  fs::remove_all(p.b + "/verify");
  d = diff_dirs(p.a, p.b);
  EXPECT_FALSE(d.tensors.compared);
  EXPECT_NE(d.tensors.note.find("run B"), std::string::npos);
}

// ---- replicas ----------------------------------------------------------------------------------------------------

TEST(RunDiffReplicas, FirstStepWhoseParameterHashDiffers) {
  TensorPair p;
  p.write(p.ra0, p.ra1);
  std::vector<std::string> h = {"init", "s0", "s1", "s2", "s3"};
  for (int r = 0; r < 2; ++r) {
    write_replicas(p.a, r, h);
    write_replicas(p.b, r, h);
  }
  auto d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.replicas.compared);
  EXPECT_FALSE(d.replicas.first_step.has_value());
  EXPECT_EQ(d.replicas.ranks[0].compared, h.size());

  // Planted: after step 2 (and so after step 3) rank 1's parameters differ; rank 0 only after step 3.
  auto h1 = h;
  h1[3] = "x2";
  h1[4] = "x3";
  write_replicas(p.b, 1, h1);
  auto h0 = h;
  h0[4] = "y3";
  write_replicas(p.b, 0, h0);
  d = diff_dirs(p.a, p.b);
  ASSERT_TRUE(d.replicas.first_step.has_value());
  EXPECT_EQ(*d.replicas.first_step, 2);
  EXPECT_EQ(*d.replicas.ranks[0].first_step, 3);
  EXPECT_EQ(d.replicas.ranks[1].hash_a, "s2");
  EXPECT_EQ(d.replicas.ranks[1].hash_b, "x2");
  // Step -1 (after the initial broadcast) counts too.
  h0[0] = "other init";
  write_replicas(p.b, 0, h0);
  d = diff_dirs(p.a, p.b);
  EXPECT_EQ(*d.replicas.first_step, -1);
}

}  // namespace
