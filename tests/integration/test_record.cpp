// End-to-end: the real binary, real ranks over Gloo on loopback, real files.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "integration_support.h"
#include "runtime/data/dataset_file.h"
#include "runtime/launch/heartbeat/progress.h"
#include "traces/analysis/summary.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;
using ddptest::run;

using ddptest::fresh_dir;
using ddptest::kExe;
using ddptest::read_json;

std::map<Stage, size_t> stage_counts(const RankTrace& r) {
  std::map<Stage, size_t> m;
  for (const auto& e : r.events)
    if (e.is_span()) m[e.stage_id()]++;
  return m;
}

TEST(Record, DefaultJobRecordsEveryStageOnEveryRankAndReplicasMatch) {
  std::string d = fresh_dir("default");
  auto r = run({kExe, "--record", "--out", d}, d + ".log");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 0: avg loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 1: avg loss"), std::string::npos) << r.output;

  auto m = read_json(d + "/manifest.json");
  ASSERT_FALSE(m.is_discarded());
  EXPECT_EQ(m["world_size"], 2);
  EXPECT_EQ(m["backend"], "gloo");
  EXPECT_EQ(m["launch"]["method"], "supervisor");
  EXPECT_EQ(m["status"], "completed");
  EXPECT_FALSE(m["versions"]["libtorch"].get<std::string>().empty());
  EXPECT_EQ(m["config"]["batch_size"], 64);
  ASSERT_EQ(m["ranks"].size(), 2u);
  for (const auto& rk : m["ranks"]) {
    EXPECT_EQ(rk["steps"], 156) << "10000 samples / 2 ranks / 64 per batch = 78 steps x 2 epochs";
    EXPECT_EQ(rk["batch"]["x"]["shape"], nlohmann::json({64, 128}));
    EXPECT_EQ(rk["batch"]["x"]["dtype"], "float32");
  }
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]) << "replicas must be bitwise identical";
  EXPECT_EQ(m["ranks"][0]["buffer_hash"], m["ranks"][1]["buffer_hash"]);
  // Each rank ran on its own share of the cores when this process may use as many cores as there are ranks (not
  // under `taskset -c 0`: the machine's core count is not what the ranks were allowed): disjoint, not empty.
  ASSERT_EQ(m["rank_hosts"].size(), 2u);
  const std::vector<int> cpus0 = m["rank_hosts"][0]["cpus"], cpus1 = m["rank_hosts"][1]["cpus"];
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) >= 2) {
    ASSERT_FALSE(cpus0.empty());
    ASSERT_FALSE(cpus1.empty());
    for (int c : cpus0) EXPECT_EQ(std::count(cpus1.begin(), cpus1.end(), c), 0) << "core " << c << " shared";
  }

  RunTrace run_trace;
  std::string err;
  ASSERT_TRUE(load_run(d, run_trace, err)) << err;
  ASSERT_EQ(run_trace.ranks.size(), 2u);
  for (const auto& rk : run_trace.ranks) {
    EXPECT_TRUE(rk.complete);
    EXPECT_EQ(rk.dropped, 0u);
    auto counts = stage_counts(rk);
    for (Stage s : {Stage::disk_read, Stage::transform, Stage::pin, Stage::h2d, Stage::wait_data, Stage::forward,
                    Stage::backward, Stage::allreduce, Stage::wait_comm, Stage::optimizer, Stage::step})
      EXPECT_EQ(counts[s], 156u) << "rank " << rk.rank << " stage " << stage_name(s);
    std::set<std::string> lanes(rk.lanes.begin(), rk.lanes.end());
    for (const char* l : {"main", "comm", "loader/0", "loader/1", "memory"}) EXPECT_TRUE(lanes.count(l)) << l;
    ASSERT_EQ(rk.clocks.size(), 2u) << "offset measured at start and checked at the end";
  }
  // One clock: a collective completes on no rank before every rank has entered it, so on the common clock each
  // rank's allreduce of a step ends after the other rank's began, within the offset's measured uncertainty. That holds
  // on any machine, loaded or not (how close the two ends are is a timing figure: bench/grad_path_bench).
  auto spans = [&](const RankTrace& rk) {
    std::map<uint32_t, std::pair<int64_t, int64_t>> t;
    for (const auto& e : rk.events)
      if (e.is_span() && e.stage_id() == Stage::allreduce)
        t[e.step] = {e.t0 + rk.clock_offset_ns(), e.t1 + rk.clock_offset_ns()};
    return t;
  };
  int64_t uncertainty = 0;
  for (const auto& rk : run_trace.ranks)
    for (const auto& c : rk.clocks) uncertainty = std::max(uncertainty, c.uncertainty_ns);
  auto s0 = spans(run_trace.ranks[0]), s1 = spans(run_trace.ranks[1]);
  ASSERT_EQ(s0.size(), 156u);
  ASSERT_EQ(s1.size(), 156u);
  for (const auto& [step, a] : s0) {
    ASSERT_TRUE(s1.count(step)) << "step " << step;
    const auto& b = s1.at(step);
    EXPECT_GE(a.second + uncertainty, b.first) << "step " << step << ": rank 0's allreduce ended before rank 1's began";
    EXPECT_GE(b.second + uncertainty, a.first) << "step " << step << ": rank 1's allreduce ended before rank 0's began";
  }

  auto tj = read_json(d + "/trace.json");
  ASSERT_FALSE(tj.is_discarded());
  std::set<int> pids;
  for (const auto& e : tj["traceEvents"])
    if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));

  auto s = run({kExe, "--summary", d, "--json"}, d + ".summary.log");
  ASSERT_EQ(s.code, 0) << s.output;
  auto sj = nlohmann::json::parse(s.output, nullptr, false);
  ASSERT_FALSE(sj.is_discarded()) << s.output;
  EXPECT_EQ(sj["ranks"][1]["steps"], 156);
  EXPECT_GT(sj["ranks"][0]["stages"]["allreduce"]["bytes"].get<double>(), 0);
}

// Gloo's event loop and worker run SCHED_BATCH unless --no-batch-sched (runtime/launch/environment/batch_scheduling.h);
// the manifest's count is read back from the kernel, so a rank that did not apply it reports 0.
TEST(Record, GlooThreadsRunUnderBatchSchedulingUnlessAskedNot) {
  for (bool batch : {true, false}) {
    std::string d = fresh_dir(batch ? "sched_batch" : "sched_normal");
    std::vector<std::string> args = {kExe, "--record", "--out", d, "--max-steps", "20", "--no-record"};
    if (!batch) args.push_back("--no-batch-sched");
    auto r = run(args, d + ".log");
    ASSERT_EQ(r.code, 0) << r.output;
    auto m = read_json(d + "/manifest.json");
    ASSERT_EQ(m["rank_hosts"].size(), 2u);
    for (const auto& h : m["rank_hosts"]) {
      if (batch)
        EXPECT_GE(h["sched_batch_threads"].get<int>(), 2) << "Gloo's device loop and its worker";
      else
        EXPECT_EQ(h["sched_batch_threads"].get<int>(), 0);
    }
    EXPECT_EQ(m["config"]["batch_sched"], batch);
    for (const auto& rk : m["ranks"]) {  // the step times are measured without recording too
      EXPECT_GT(rk["step_time_median_ms"].get<double>(), 0);
      EXPECT_GT(rk["step_time_mean_ms"].get<double>(), 0);
      EXPECT_GE(rk["step_time_p90_ms"].get<double>(), rk["step_time_median_ms"].get<double>());
    }
  }
}

TEST(Record, BatchNormReplicasDivergeInTheirBuffers) {
  // The replica comparison bites: BatchNorm's running statistics come from each rank's own batches.
  std::string d = fresh_dir("bn");
  auto r = run({kExe, "--record", "--out", d, "--model", "mlp-bn", "--max-steps", "5", "--no-record"}, d + ".log");
  ASSERT_EQ(r.code, 0) << r.output;
  auto m = read_json(d + "/manifest.json");
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]);
  EXPECT_NE(m["ranks"][0]["buffer_hash"], m["ranks"][1]["buffer_hash"]);
  EXPECT_FALSE(fs::exists(d + "/rank0.ddpt")) << "--no-record writes no trace";
}

size_t allreduces_with_micro(const RankTrace& rk, int micro, size_t* total) {
  size_t n = 0;
  *total = 0;
  for (const auto& e : rk.events)
    if (e.is_span() && e.stage_id() == Stage::allreduce) {
      ++*total;
      n += e.micro == micro;
    }
  return n;
}

TEST(Record, AccumulationCommunicatesOncePerOptimizerStep) {
  std::string d = fresh_dir("accum");
  auto r = run({kExe, "--record", "--out", d, "--accum-steps", "4", "--epochs", "1", "--bucket-mb", "0.1"}, d + ".log");
  ASSERT_EQ(r.code, 0) << r.output;
  auto m = read_json(d + "/manifest.json");
  const size_t buckets = m["gradient_buckets"].size();
  ASSERT_GT(buckets, 1u) << "small buckets: several allreduces per round";
  RunTrace rt;
  std::string err;
  ASSERT_TRUE(load_run(d, rt, err)) << err;
  for (const auto& rk : rt.ranks) {
    auto counts = stage_counts(rk);
    const size_t steps = counts[Stage::step];
    EXPECT_EQ(steps, 78u / 4);
    EXPECT_EQ(counts[Stage::forward], steps * 4);
    size_t total = 0;
    EXPECT_EQ(allreduces_with_micro(rk, 3, &total), steps * buckets) << "one round of every bucket, on micro-step 3";
    EXPECT_EQ(total, steps * buckets) << "no allreduce on micro-steps 0..2";
    EXPECT_EQ(counts[Stage::wait_comm], steps);
  }
  // The same count on a run that syncs every micro-step tells the two apart.
  std::string d2 = fresh_dir("accum_sync");
  r = run(
      {kExe, "--record", "--out", d2, "--accum-steps", "4", "--epochs", "1", "--bucket-mb", "0.1", "--sync-every-step"},
      d2 + ".log");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(load_run(d2, rt, err)) << err;
  size_t total = 0;
  allreduces_with_micro(rt.ranks[0], 3, &total);
  EXPECT_EQ(total, 4 * (78u / 4) * buckets);
  auto m2 = read_json(d2 + "/manifest.json");
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]);
  EXPECT_EQ(m2["ranks"][0]["param_hash"], m2["ranks"][1]["param_hash"]);
}

TEST(Record, KillingRankOneEndsTheRunNamingIt) {
  std::string d = fresh_dir("kill");
  ddptest::Proc sup = ddptest::start({kExe, "--record", "--out", d, "--epochs", "200"}, d + ".log");
  // Wait until rank 1 is well into training (100 steps: several of the recorder's 50 ms flushes, whatever the step
  // time), then SIGKILL it from outside.
  ProgressSnapshot p1 = ddptest::wait_for_step(d, 1, 100);
  ASSERT_GE(p1.step, 100) << "rank 1 never got going";
  ASSERT_EQ(::kill(p1.pid, SIGKILL), 0);
  auto killed_at = std::chrono::steady_clock::now();
  int code = ddptest::wait(sup, 30);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::string out = ddptest::read_file(d + ".log");
  EXPECT_EQ(code, 1) << out;
  EXPECT_LT(took, 5.0) << "the supervisor must end the run within 5 s";
  EXPECT_NE(out.find("rank 1 failed"), std::string::npos) << out;
  EXPECT_NE(out.find("SIGKILL"), std::string::npos) << out;
  auto p0 = read_progress(progress_file(d, 0));
  EXPECT_EQ(::kill(p0.pid, 0), -1) << "rank 0 must not outlive the run";
  auto status = read_json(d + "/run_status.json");
  EXPECT_EQ(status["culprit"], 1);
  // Both traces still export: rank 1's up to its last flush.
  RunTrace rt;
  std::string err;
  ASSERT_TRUE(load_run(d, rt, err)) << err;
  ASSERT_EQ(rt.ranks.size(), 2u);
  EXPECT_FALSE(rt.ranks[1].complete);
  EXPECT_GT(stage_counts(rt.ranks[1])[Stage::forward], 10u);
  auto ex = run({kExe, "--export", d, "-o", d + "/again.json"}, d + ".export.log");
  EXPECT_EQ(ex.code, 0) << ex.output;
  EXPECT_FALSE(read_json(d + "/again.json").is_discarded());
}

TEST(Record, InterruptingTheSupervisorEndsEveryRankAndKeepsTheTraces) {
  std::string d = fresh_dir("interrupt");
  ddptest::Proc sup = ddptest::start({kExe, "--record", "--out", d, "--epochs", "200"}, d + ".log");
  ProgressSnapshot p1 = ddptest::wait_for_step(d, 1, 20);
  ASSERT_GE(p1.step, 20);
  ASSERT_EQ(::kill(sup.pid, SIGINT), 0);  // what Ctrl-C sends
  int code = ddptest::wait(sup, 30);
  std::string out = ddptest::read_file(d + ".log");
  EXPECT_EQ(code, 130) << out;
  EXPECT_NE(out.find("interrupted"), std::string::npos) << out;
  for (int r = 0; r < 2; ++r) EXPECT_EQ(::kill(read_progress(progress_file(d, r)).pid, 0), -1) << "rank " << r;
  EXPECT_TRUE(fs::exists(d + "/trace.json")) << "the traces are exported after an interrupt";
}

TEST(Record, WorkersRunUnderAnExternalLauncherEnvironment) {
  std::string d = fresh_dir("external");
  // What torchrun --no-python / srun / mpirun do: start every rank with the rendezvous in the environment.
  int port = 29000 + ::getpid() % 2000;
  std::vector<ddptest::Proc> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(ddptest::start({kExe, "--worker", "--out", d, "--epochs", "1", "--max-steps", "10"},
                                   d + ".rank" + std::to_string(r) + ".log",
                                   {{"RANK", std::to_string(r)},
                                    {"WORLD_SIZE", "2"},
                                    {"LOCAL_RANK", std::to_string(r)},
                                    {"MASTER_ADDR", "127.0.0.1"},
                                    {"MASTER_PORT", std::to_string(port)}}));
  for (auto& p : ranks) EXPECT_EQ(ddptest::wait(p, 120), 0) << ddptest::read_file(p.log);
  auto m = read_json(d + "/manifest.json");
  ASSERT_FALSE(m.is_discarded());
  EXPECT_EQ(m["launch"]["method"], "env");
  EXPECT_EQ(m["ranks"][0]["steps"], 10);
  EXPECT_TRUE(fs::exists(d + "/trace.json")) << "rank 0 exports when no supervisor does";
}

TEST(Record, ImageFolderTrainsTheCnnWithDecodeOnTheWorkers) {
  std::string d = fresh_dir("images");
  auto r = run({kExe, "--record", "--out", d, "--dataset", "images", "--dataset-size", "512", "--batch-size", "32",
                "--epochs", "1"},
               d + ".log", 300);
  ASSERT_EQ(r.code, 0) << r.output;
  auto m = read_json(d + "/manifest.json");
  EXPECT_EQ(m["ranks"][0]["batch"]["x"]["shape"], nlohmann::json({32, 3, 32, 32}));
  EXPECT_EQ(m["ranks"][0]["param_hash"], m["ranks"][1]["param_hash"]);
  RunTrace rt;
  std::string err;
  ASSERT_TRUE(load_run(d, rt, err)) << err;
  for (const auto& rk : rt.ranks) {
    auto counts = stage_counts(rk);
    EXPECT_EQ(counts[Stage::step], 512u / 2 / 32);
    EXPECT_EQ(counts[Stage::transform], counts[Stage::step]) << "decode + crop on the loader lanes";
  }
}

// The user's own data: 10 classes and samples of shape {3, 4} (a version 2 .ddpd). The model is sized from the file;
// before, rank 0 failed mid-run with "Target 4 is out of bounds" (classes were fixed at 2).
TEST(Record, YourOwnDataOfAnyShapeAndClassCountTrains) {
  std::string d = fresh_dir("own_data");
  fs::create_directories(d);
  std::vector<float> x(256 * 12);
  std::vector<int32_t> y(256);
  for (size_t i = 0; i < y.size(); ++i) {
    y[i] = static_cast<int32_t>(i % 10);
    for (size_t f = 0; f < 12; ++f) x[i * 12 + f] = static_cast<float>((i * 31 + f * 7) % 13) - 6.0f;
  }
  std::string err;
  ASSERT_TRUE(write_dataset_file(d + "/ten.ddpd", {3, 4}, 10, x, y, err)) << err;
  auto r =
      run({kExe, "--record", "--out", d + "/run", "--data", d + "/ten.ddpd", "--batch-size", "16", "--max-steps", "4"},
          d + ".log", 300);
  ASSERT_EQ(r.code, 0) << r.output;
  auto m = read_json(d + "/run/manifest.json");
  EXPECT_EQ(m["config"]["classes"], 10);
  EXPECT_EQ(m["config"]["features"], 12);
  EXPECT_EQ(m["ranks"][0]["batch"]["x"]["shape"], nlohmann::json({16, 3, 4}));

  // scripts/to_ddpd.py brings numpy arrays in one command (Debian's python3-numpy; skipped without it).
  if (std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") != 0) {
    std::cout << "[ SKIPPED  ] to_ddpd.py: /usr/bin/python3 has no numpy (apt install python3-numpy)\n";
    return;
  }
  const std::string npz = d + "/arrays.npz", out = d + "/from_numpy.ddpd";
  r = run({"/usr/bin/python3", "-c",
           "import numpy as np; r = np.random.default_rng(0); "
           "np.savez('" +
               npz + "', x=r.normal(size=(200, 2, 5)).astype('f8'), y=r.integers(0, 4, 200))"},
          d + ".npz.log", 60);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run({"/usr/bin/python3", std::string(DDP_SOURCE_DIR) + "/scripts/to_ddpd.py", npz, out}, d + ".conv.log", 60);
  ASSERT_EQ(r.code, 0) << r.output;
  DatasetFile f;
  ASSERT_TRUE(f.open(out, err)) << err;
  EXPECT_EQ(f.sample_shape(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(f.samples(), 200);
  EXPECT_EQ(f.classes(), 4);
}

TEST(Record, BadInputGetsOneClearErrorAndNonZeroExit) {
  std::string d = fresh_dir("bad");
  auto r = run({kExe, "--summary", d + "/nope"}, d + ".1.log");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("not a directory"), std::string::npos) << r.output;
  r = run({kExe, "--record", "--epochs", "zero"}, d + ".2.log");
  EXPECT_EQ(r.code, 2);
  fs::create_directories(d);
  std::ofstream(d + "/junk.ddpd") << "not a dataset";
  // A bad dataset is the user's input: refused before any rank starts, as a usage error.
  r = run({kExe, "--record", "--out", d + "/run", "--data", d + "/junk.ddpd"}, d + ".3.log", 60);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not a ddp_profile dataset"), std::string::npos) << r.output;
  // A mistyped --data path must not train on a synthetic dataset generated there.
  const std::string typo = d + "/no/such/typo.ddpd";
  for (const char* mode : {"--record", "--check"}) {
    r = run({kExe, mode, "--out", d + "/typo", "--data", typo}, d + ".6.log", 60);
    EXPECT_EQ(r.code, 2) << mode << ": " << r.output;
    EXPECT_NE(r.output.find(typo + " does not exist"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(d + "/no")) << "nothing is generated at a path the user typed";
  }
  // Options only a rank can judge (device, AMP) still end as a usage error with the rank's reason.
  r = run({kExe, "--record", "--out", d + "/amp", "--amp", "fp16", "--device", "cpu"}, d + ".5.log", 60);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--amp fp16 needs a CUDA device"), std::string::npos) << r.output;
  r = run({kExe, "--worker", "--out", d + "/w"}, d + ".4.log", 60, {});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("RANK"), std::string::npos) << r.output;
}
}  // namespace
