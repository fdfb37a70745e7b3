#pragma once
// What the run-diff tests share: synthetic run folders (manifests and verify/ summaries written by hand in the
// runtime's format, rank traces through TraceWriter) and the diff of two of them.
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

#include "tests/support/test_manifest.h"
#include "traces/diff/run_diff.h"
#include "traces/native/trace_writer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace run_diff_test {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("ddp_run_diff_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
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

// A manifest shaped like the one the runtime writes: two ranks, their step times and hashes as our job records them.
inline json base_manifest() {
  json m = ddp::testing::our_job_manifest_json(2);
  m["versions"]["cuda"] = nullptr;
  m["rank_hosts"] = {{{"host", "vm"}, {"pid", 1000}, {"cpus", {0}}, {"sched_batch_threads", 0}}};
  m["config"]["checkpoint_steps"] = {0, 3};
  for (int r = 0; r < 2; ++r) {
    json& rank = m["ranks"][r];
    rank["steps"] = 10;
    rank["step_time_median_ms"] = 8.0 + r;
    rank["param_hash"] = "abc";
    rank["clock"] = {
        {"offset_ns_start", 10 * r}, {"uncertainty_ns_start", 0}, {"offset_ns_end", 10 * r}, {"uncertainty_ns_end", 0}};
  }
  return m;
}

inline void write_manifest(const std::string& dir, const json& m) {
  std::ofstream(dir + "/manifest.json") << m.dump(2);
}

// Per-rank stage times of a synthetic trace, ms per step.
struct StageMs {
  double forward = 5, backward = 10, optimizer = 1, wait_comm = 0;
};

inline void write_trace(const std::string& dir, uint32_t rank, uint32_t world, int steps, const StageMs& ms) {
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
inline std::vector<Rec> base_records(int steps, int micros = 1) {
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

inline Rec& find(std::vector<Rec>& v, int64_t step, const std::string& kind, const std::string& name, int micro = -1) {
  for (auto& r : v)
    if (r.step == step && r.kind == kind && r.name == name && r.micro == micro) return r;
  throw std::runtime_error("no such record");
}

inline json stats_json(const Rec& r) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };  // NaN is stored as null
  return {{"count", static_cast<int64_t>(r.count)},
          {"mean", num(r.mean)},
          {"std", num(r.std)},
          {"min", -1.0},
          {"max", 1.0},
          {"l2", num(r.l2)},
          {"hash", r.hash}};
}

inline void write_summaries(const std::string& dir, int rank, const std::vector<Rec>& recs) {
  fs::create_directories(dir + "/verify");
  std::ofstream out(dir + "/verify/rank" + std::to_string(rank) + ".summaries.jsonl");
  for (const auto& r : recs) {
    json j = {{"step", r.step}, {"kind", r.kind}, {"name", r.name}, {"stats", stats_json(r)}};
    if (r.micro >= 0) j["micro"] = r.micro;
    out << j.dump() << "\n";
  }
}

inline void write_replicas(const std::string& dir, int rank, const std::vector<std::string>& hashes) {
  fs::create_directories(dir + "/verify");
  std::ofstream out(dir + "/verify/rank" + std::to_string(rank) + ".replicas.jsonl");
  for (size_t i = 0; i < hashes.size(); ++i)
    out << "{\"step\":" << static_cast<int64_t>(i) - 1 << ",\"param_hash\":\"" << hashes[i] << "\"}\n";
}

inline ddp::RunDiff diff_dirs(const std::string& a, const std::string& b, const ddp::DiffOptions& opt = {}) {
  ddp::DiffRun ra, rb;
  std::string err;
  EXPECT_TRUE(ddp::load_diff_run(a, ra, err)) << err;
  EXPECT_TRUE(ddp::load_diff_run(b, rb, err)) << err;
  return ddp::diff_runs(ra, rb, opt);
}

inline const ddp::StageRow* stage_row(const ddp::TimingBlock& b, const std::string& stage) {
  for (const auto& s : b.stages)
    if (s.stage == stage) return &s;
  return nullptr;
}

// Two runs of two ranks with the same tensor summaries; a test changes run b's before writing.
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
}  // namespace run_diff_test
