// Run diff on synthetic run folders: manifests and verify/ summaries written by hand in the runtime's format, rank
// traces through TraceWriter. Every check comes with its planted difference: the same assertion on the unchanged
// pair must come out the other way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "traces/diff/run_diff.h"
#include "traces/native/trace_writer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("ddp_run_diff_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string sub(const std::string& name) const {
    fs::create_directories(path / name);
    return (path / name).string();
  }
};

// A manifest shaped like the one the runtime writes.
json base_manifest() {
  json ranks = json::array();
  for (int r = 0; r < 2; ++r)
    ranks.push_back({{"rank", r},
                     {"host", "vm"},
                     {"pid", 1000 + r},
                     {"device", "cpu"},
                     {"batch", {{"x", {{"shape", {64, 128}}, {"dtype", "float32"}}}}},
                     {"steps", 10},
                     {"step_time_median_ms", 8.0 + r},
                     {"param_hash", "abc"},
                     {"clock", {{"offset_ns_start", 10 * r}}}});
  return {{"tool", "ddp_profile"},
          {"versions", {{"libtorch", "1.13.0"}, {"ddp_profile", "0.1.0"}, {"cuda", nullptr}}},
          {"device", {{"type", "cpu"}, {"name", "Some CPU"}}},
          {"backend", "gloo"},
          {"world_size", 2},
          {"launch", {{"method", "supervisor"}, {"master_addr", "127.0.0.1"}}},
          {"seeds", {{"data", 0}, {"weights", 0}, {"sampler", 0}}},
          {"config",
           {{"batch_size", 64}, {"accum_steps", 1}, {"amp", "auto"}, {"bucket_mb", 25.0}, {"seed", 0},
            {"nproc", 2}, {"backend", "auto"}, {"workers", 2}, {"lr", 0.001}, {"model", "mlp"},
            {"checkpoint_steps", {0, 3}}}},
          {"host", "vm"},
          {"start_time", "2026-01-01T00:00:00Z"},
          {"end_time", "2026-01-01T00:01:00Z"},
          {"status", "completed"},
          {"rank_hosts", {{{"host", "vm"}, {"pid", 1000}}}},
          {"ranks", ranks}};
}

void write_manifest(const std::string& dir, const json& m) { std::ofstream(dir + "/manifest.json") << m.dump(2); }

// Per-rank stage times of a synthetic trace, ms per step.
struct StageMs {
  double forward = 5, backward = 10, optimizer = 1, wait_comm = 0;
};

void write_trace(const std::string& dir, uint32_t rank, uint32_t world, int steps, const StageMs& ms) {
  ddp::TraceWriter tw;
  std::string err;
  ASSERT_TRUE(tw.open(dir + "/rank" + std::to_string(rank) + ".ddpt", rank, world, err)) << err;
  tw.write_lane(0, "main");
  tw.write_clock({0, 1000, 0, 0, 8});
  std::vector<ddp::Event> evs;
  int64_t t = 1'000'000;
  auto span = [&](ddp::Stage s, int64_t t0, int64_t dur, uint32_t step) {
    ddp::Event e = ddp::make_span(s, 0, t0, t0 + dur);
    e.step = step;
    evs.push_back(e);
  };
  auto ns = [](double m) { return static_cast<int64_t>(std::llround(m * 1e6)); };
  for (int s = 0; s < steps; ++s) {
    int64_t t0 = t;
    span(ddp::Stage::forward, t, ns(ms.forward), s);
    t += ns(ms.forward);
    span(ddp::Stage::backward, t, ns(ms.backward), s);
    t += ns(ms.backward);
    if (ms.wait_comm > 0) {
      span(ddp::Stage::wait_comm, t, ns(ms.wait_comm), s);
      t += ns(ms.wait_comm);
    }
    span(ddp::Stage::optimizer, t, ns(ms.optimizer), s);
    t += ns(ms.optimizer);
    span(ddp::Stage::step, t0, t - t0, s);
  }
  std::sort(evs.begin(), evs.end(), [](const ddp::Event& a, const ddp::Event& b) { return a.t0 < b.t0; });
  ASSERT_TRUE(tw.write_events(0, evs.data(), evs.size()));
  tw.write_end(evs.size(), 0);
  tw.close();
}

// One summary line as the runtime writes it.
struct Rec {
  int64_t step;
  std::string kind;
  int micro;  // -1: no "micro" key
  std::string name;
  double count, mean, std, l2;
  std::string hash;
};

// A deterministic set of records: per step the parameters, the activations of each micro-step, the gradients.
std::vector<Rec> base_records(int steps, int micros = 1) {
  std::vector<Rec> out;
  const char* params[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  const char* acts[] = {"fc1", "relu", "fc2"};
  auto stats = [](int s, int i, double scale) {
    double mean = scale * 1e-3 * (i + 1) * (s + 1), sd = scale * 0.05 * (1 + 0.1 * i + 0.01 * s);
    double count = 512.0 * (i + 1);
    return std::array<double, 4>{count, mean, sd, std::sqrt(count * (mean * mean + sd * sd))};
  };
  auto h = [](int s, const std::string& k, int m, const std::string& n) {
    return std::to_string(std::hash<std::string>{}(std::to_string(s) + k + std::to_string(m) + n));
  };
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < 4; ++i) {
      auto st = stats(s, i, 1.0);
      out.push_back({s, "param", -1, params[i], st[0], st[1], st[2], st[3], h(s, "param", -1, params[i])});
    }
    for (int m = 0; m < micros; ++m)
      for (int i = 0; i < 3; ++i) {
        auto st = stats(s, i, 10.0);
        out.push_back({s, "activation", m, acts[i], st[0], st[1], st[2], st[3], h(s, "act", m, acts[i])});
      }
    for (int i = 0; i < 4; ++i) {
      auto st = stats(s, i, 0.1);
      out.push_back({s, "grad", -1, params[i], st[0], st[1], st[2], st[3], h(s, "grad", -1, params[i])});
    }
  }
  return out;
}

Rec& find(std::vector<Rec>& v, int64_t step, const std::string& kind, const std::string& name, int micro = -1) {
  for (auto& r : v)
    if (r.step == step && r.kind == kind && r.name == name && r.micro == micro) return r;
  throw std::runtime_error("no such record");
}

json stats_json(const Rec& r) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };  // NaN is stored as null
  return {{"count", r.count}, {"mean", num(r.mean)}, {"std", num(r.std)}, {"min", -1.0},
          {"max", 1.0},       {"l2", num(r.l2)},     {"hash", r.hash}};
}

void write_summaries(const std::string& dir, int rank, const std::vector<Rec>& recs) {
  fs::create_directories(dir + "/verify");
  std::ofstream out(dir + "/verify/rank" + std::to_string(rank) + ".summaries.jsonl");
  for (const auto& r : recs) {
    json j = {{"step", r.step}, {"kind", r.kind}, {"name", r.name}, {"stats", stats_json(r)}};
    if (r.micro >= 0) j["micro"] = r.micro;
    out << j.dump() << "\n";
  }
}

void write_replicas(const std::string& dir, int rank, const std::vector<std::string>& hashes) {
  fs::create_directories(dir + "/verify");
  std::ofstream out(dir + "/verify/rank" + std::to_string(rank) + ".replicas.jsonl");
  for (size_t i = 0; i < hashes.size(); ++i)
    out << "{\"step\":" << static_cast<int64_t>(i) - 1 << ",\"param_hash\":\"" << hashes[i] << "\"}\n";
}

ddp::RunDiff diff_dirs(const std::string& a, const std::string& b, const ddp::DiffOptions& opt = {}) {
  ddp::DiffRun ra, rb;
  std::string err;
  EXPECT_TRUE(ddp::load_diff_run(a, ra, err)) << err;
  EXPECT_TRUE(ddp::load_diff_run(b, rb, err)) << err;
  return ddp::diff_runs(ra, rb, opt);
}

const ddp::StageRow* stage_row(const ddp::TimingBlock& b, const std::string& stage) {
  for (const auto& s : b.stages)
    if (s.stage == stage) return &s;
  return nullptr;
}

// ---- config ------------------------------------------------------------------------------------------------------

TEST(RunDiffConfig, IdenticalManifestsHaveNoDifferencesButPlantedOnesAreListed) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  // Times, pids, clock offsets and per-rank outcomes differ between any two runs: they are not config differences.
  json m2 = m;
  m2["start_time"] = "2027-01-01T00:00:00Z";
  m2["ranks"][1]["pid"] = 4242;
  m2["ranks"][0]["step_time_median_ms"] = 99.0;
  m2["ranks"][0]["clock"]["offset_ns_start"] = 7;
  write_manifest(b, m2);
  auto d = diff_dirs(a, b);
  EXPECT_TRUE(d.config.empty());
  EXPECT_TRUE(d.distributed_changed.empty());
  EXPECT_TRUE(d.warning.empty());

  // Planted: the learning rate and the per-rank batch shape.
  m2["config"]["lr"] = 0.01;
  m2["ranks"][1]["batch"]["x"]["shape"] = {32, 128};
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  ASSERT_EQ(d.config.size(), 2u);
  EXPECT_EQ(d.config[0].key, "config.lr");
  EXPECT_EQ(d.config[0].a, 0.001);
  EXPECT_EQ(d.config[0].b, 0.01);
  EXPECT_TRUE(d.config[0].variable.empty());
  EXPECT_EQ(d.config[1].key, "ranks.1.batch.x.shape");
  EXPECT_TRUE(d.distributed_changed.empty());  // lr is not a distributed variable
  EXPECT_TRUE(d.warning.empty());
}

TEST(RunDiffConfig, OneDistributedVariableDoesNotWarnTwoDo) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  json m2 = m;
  m2["config"]["batch_size"] = 32;
  write_manifest(b, m2);
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"batch size"});
  EXPECT_TRUE(d.warning.empty());
  EXPECT_EQ(ddp::run_diff_text(d).find("WARNING"), std::string::npos);

  // Planted: a non-distributed option changed too (the seed's rule is one variable at a time, whichever kind).
  m2["config"]["lr"] = 0.002;
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"batch size"});
  EXPECT_NE(d.warning.find("batch size changed together with config.lr"), std::string::npos) << d.warning;

  // Planted: a second distributed variable.
  m2["config"]["workers"] = 4;
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, (std::vector<std::string>{"batch size", "workers"}));
  ASSERT_FALSE(d.warning.empty());
  EXPECT_NE(d.warning.find("batch size"), std::string::npos);
  EXPECT_NE(d.warning.find("workers"), std::string::npos);
  EXPECT_NE(d.warning.find("one variable at a time"), std::string::npos);
  std::string text = ddp::run_diff_text(d);
  EXPECT_NE(text.find("WARNING"), std::string::npos);
  EXPECT_NE(text.find("[workers]"), std::string::npos);
}

TEST(RunDiffConfig, AVariableSeenUnderSeveralKeysCountsOnce) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  json m2 = m;
  // World size shows in world_size and config.nproc; the seed in config.seed and every seeds.* entry.
  m2["world_size"] = 4;
  m2["config"]["nproc"] = 4;
  write_manifest(b, m2);
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.config.size(), 2u);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"world size"});
  EXPECT_TRUE(d.warning.empty());

  m2 = m;
  m2["config"]["seed"] = 1;
  m2["seeds"] = {{"data", 1}, {"weights", 1}, {"sampler", 1}};
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.config.size(), 4u);
  EXPECT_EQ(d.distributed_changed, std::vector<std::string>{"seed"});
  EXPECT_TRUE(d.warning.empty());

  // Planted: the backend and the launch method change together with the seed.
  m2["backend"] = "nccl";
  m2["launch"]["method"] = "torchrun";
  write_manifest(b, m2);
  d = diff_dirs(a, b);
  EXPECT_EQ(d.distributed_changed, (std::vector<std::string>{"backend", "seed", "launch method"}));
  EXPECT_NE(d.warning.find("3 distributed variables"), std::string::npos);
}

TEST(RunDiffConfig, EveryNamedDistributedVariableIsRecognised) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  const std::vector<std::pair<std::string, json>> planted = {
      {"/world_size", 4},        {"/backend", "nccl"},        {"/config/batch_size", 16},
      {"/config/accum_steps", 4}, {"/config/amp", "on"},       {"/config/bucket_mb", 1.0},
      {"/config/seed", 3},        {"/launch/method", "srun"},  {"/config/workers", 0}};
  std::set<std::string> seen;
  for (const auto& [ptr, v] : planted) {
    json m2 = m;
    m2[json::json_pointer(ptr)] = v;
    write_manifest(b, m2);
    auto d = diff_dirs(a, b);
    ASSERT_EQ(d.distributed_changed.size(), 1u) << ptr;
    seen.insert(d.distributed_changed[0]);
  }
  EXPECT_EQ(seen.size(), 9u);
}

// ---- timing ------------------------------------------------------------------------------------------------------

TEST(RunDiffTiming, StageDeltasFromTraces) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  write_manifest(a, base_manifest());
  write_manifest(b, base_manifest());
  for (uint32_t r = 0; r < 2; ++r) {
    write_trace(a, r, 2, 10, StageMs{});
    write_trace(b, r, 2, 10, StageMs{});
  }
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.timing.source, "traces");
  const ddp::StageRow* fw = stage_row(d.timing.mean, "forward");
  ASSERT_NE(fw, nullptr);
  EXPECT_NEAR(*fw->per_step_ms.a, 5.0, 1e-6);
  EXPECT_NEAR(*fw->per_step_ms.b - *fw->per_step_ms.a, 0.0, 1e-9);
  EXPECT_EQ(stage_row(d.timing.mean, "wait_comm"), nullptr);

  // Planted: rank 1 of run B has a 3 ms slower backward and 2 ms of exposed communication.
  StageMs slow;
  slow.backward = 13;
  slow.wait_comm = 2;
  write_trace(b, 1, 2, 10, slow);
  d = diff_dirs(a, b);
  const ddp::StageRow* bw = stage_row(d.timing.mean, "backward");
  ASSERT_NE(bw, nullptr);
  EXPECT_NEAR(*bw->per_step_ms.a, 10.0, 1e-6);
  EXPECT_NEAR(*bw->per_step_ms.b, 11.5, 1e-6);  // mean over the two ranks
  const ddp::StageRow* bw1 = stage_row(d.timing.ranks.at(1), "backward");
  const ddp::StageRow* bw0 = stage_row(d.timing.ranks.at(0), "backward");
  EXPECT_NEAR(*bw1->per_step_ms.b - *bw1->per_step_ms.a, 3.0, 1e-6);
  EXPECT_NEAR(*bw0->per_step_ms.b - *bw0->per_step_ms.a, 0.0, 1e-9);
  const ddp::StageRow* wc = stage_row(d.timing.ranks.at(1), "wait_comm");
  ASSERT_NE(wc, nullptr);
  EXPECT_NEAR(*wc->per_step_ms.a, 0.0, 1e-12);  // absent in A: no time there
  EXPECT_NEAR(*wc->per_step_ms.b, 2.0, 1e-6);
  EXPECT_NEAR(*d.timing.ranks.at(1).step_median_ms.b - *d.timing.ranks.at(1).step_median_ms.a, 5.0, 1e-6);
  EXPECT_NEAR(*d.timing.ranks.at(0).step_median_ms.b - *d.timing.ranks.at(0).step_median_ms.a, 0.0, 1e-9);

  json j = ddp::run_diff_json(d);
  bool found = false;
  for (const auto& row : j["timing"]["mean"]["stages_ms_per_step"])
    if (row["stage"] == "backward") {
      found = true;
      EXPECT_NEAR(row["delta"].get<double>(), 1.5, 1e-6);
      EXPECT_NEAR(row["delta_pct"].get<double>(), 15.0, 1e-4);
    }
  EXPECT_TRUE(found);
}

TEST(RunDiffTiming, FallsBackToTheManifestWithoutTraces) {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  json m = base_manifest();
  write_manifest(a, m);
  write_manifest(b, m);
  auto d = diff_dirs(a, b);
  EXPECT_EQ(d.timing.source, "manifest");
  EXPECT_TRUE(d.timing.mean.stages.empty());
  EXPECT_NEAR(*d.timing.mean.step_median_ms.a, 8.5, 1e-9);
  EXPECT_NEAR(*d.timing.mean.step_median_ms.b - *d.timing.mean.step_median_ms.a, 0.0, 1e-12);

  // Planted: B's rank 0 was 4 ms slower per step.
  m["ranks"][0]["step_time_median_ms"] = 12.0;
  write_manifest(b, m);
  d = diff_dirs(a, b);
  EXPECT_NEAR(*d.timing.ranks.at(0).step_median_ms.b - *d.timing.ranks.at(0).step_median_ms.a, 4.0, 1e-9);
  EXPECT_NEAR(*d.timing.mean.step_median_ms.b - *d.timing.mean.step_median_ms.a, 2.0, 1e-9);
  EXPECT_FALSE(d.timing.note.empty());
}

// ---- tensors -----------------------------------------------------------------------------------------------------

struct TensorPair {
  TempDir t;
  std::string a = t.sub("a"), b = t.sub("b");
  std::vector<Rec> ra0 = base_records(3), ra1 = base_records(3);
  TensorPair() {
    write_manifest(a, base_manifest());
    write_manifest(b, base_manifest());
  }
  void write(const std::vector<Rec>& b0, const std::vector<Rec>& b1) {
    write_summaries(a, 0, ra0);
    write_summaries(a, 1, ra1);
    write_summaries(b, 0, b0);
    write_summaries(b, 1, b1);
  }
};

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
