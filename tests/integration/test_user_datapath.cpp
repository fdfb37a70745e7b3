// A user's own image-folder script (tests/python/user_scripts/datapath_job.py: torchvision's ImageFolder, PIL,
// DataLoader workers) under `ddp_profile --record -- torchrun ...`, with no code change: every DataLoader worker's
// read, transform and collate, every step's stages and gradient buckets with their bytes, memory counters and the
// clock handshake land in the rank's native trace, and the analysis names each planted data-path fault at its stage
// and rank; the balanced run blames no data stage. Skips, saying so, without the venv's torch and torchvision.
#include <gtest/gtest.h>

#include <cmath>

#include "traces/native/load_run.h"
#include "user_check_support.h"

namespace {
using ddptest::fresh_dir;
using ddptest::user_check::companion_env;
using ddptest::user_check::kScripts;
using ddptest::user_check::torchrun_cmd;
using ddptest::user_check::UserCheck;

const std::string kJob = kScripts + "/datapath_job.py";

struct Recorded {
  std::string dir;
  int code = 0;
  std::string output;   // --record's own (the job's output and the analysis)
  nlohmann::json a;     // --analyze DIR --json
  ddp::RunTrace trace;  // the native traces made from the companion's records

  const nlohmann::json* top_cause() const {
    const auto& c = a["causes"];
    return c.is_array() && !c.empty() ? &c[0] : nullptr;
  }
  bool flagged(const std::string& id, int rank) const {
    for (const auto& f : a.value("flags", nlohmann::json::array()))
      if (f["id"] == id && f["rank"] == rank) return true;
    return false;
  }
  // Seconds of the rank's spans of `stage` on lanes whose name starts with `lane`.
  double seconds(int rank, ddp::Stage stage, const std::string& lane) const {
    double ns = 0;
    for (const auto& t : trace.ranks)
      if (static_cast<int>(t.rank) == rank)
        for (const auto& e : t.events)
          if (e.is_span() && e.stage_id() == stage && t.lane_name(e.lane).rfind(lane, 0) == 0)
            ns += static_cast<double>(e.duration());
    return ns / 1e9;
  }
};

class UserDatapath : public UserCheck {
 protected:
  void SetUp() override {
    UserCheck::SetUp();
    if (IsSkipped()) return;
    if (!ddptest::user_check::venv_has(torchrun_, "torchvision"))
      GTEST_SKIP() << "the torch venv has no torchvision: bash scripts/torchrun_venv.sh installs it";
  }

  Recorded record(const std::string& name, const std::vector<std::string>& job_args) {
    Recorded r;
    r.dir = fresh_dir("datapath_" + name);
    std::vector<std::string> args = {ddptest::kExe, "--record", "--out", r.dir, "--"};
    std::vector<std::string> job = {"--data", fresh_dir("datapath_images")};
    job.insert(job.end(), job_args.begin(), job_args.end());
    for (const auto& a : torchrun_cmd(torchrun_, 2, kJob, job)) args.push_back(a);
    auto res = ddptest::run(args, r.dir + ".log", 600, companion_env(torchrun_));
    r.code = res.code;
    r.output = res.output;
    auto an = ddptest::run({ddptest::kExe, "--analyze", r.dir, "--json"}, r.dir + ".analyze.log", 120);
    r.a = ddptest::printed_json(an.output);
    std::string err;
    EXPECT_TRUE(ddp::load_run(r.dir, r.trace, err)) << err;
    return r;
  }
};

std::string cause_text(const nlohmann::json* c) { return c ? c->dump() : "no cause"; }

// The job as it is: every step of every rank, the workers' lanes with their stages, each bucket's allreduce with its
// bytes, the resident set per step, and the clock from the handshake in the manifest.
TEST_F(UserDatapath, EveryStepEveryWorkerEveryBucketAndTheClockAreRecorded) {
  Recorded r = record("balanced", {"--epochs", "2", "--workers", "2"});
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(r.trace.ranks.size(), 2u);
  for (const auto& t : r.trace.ranks) {
    std::set<std::string> lanes(t.lanes.begin(), t.lanes.end());
    EXPECT_TRUE(lanes.count("main") && lanes.count("comm") && lanes.count("loader/0") && lanes.count("loader/1"))
        << "rank " << t.rank;
    std::set<uint32_t> steps;
    size_t rss = 0, buckets = 0;
    for (const auto& e : t.events) {
      if (e.is_span() && e.stage_id() == ddp::Stage::step) steps.insert(e.step);
      if (!e.is_span() && e.counter_id() == ddp::Counter::host_rss_bytes && e.value > 0) ++rss;
      if (e.is_span() && e.stage_id() == ddp::Stage::allreduce && e.value > 0) ++buckets;
    }
    // 256 images, 2 ranks, batches of 8, 2 epochs: 32 optimizer steps, every one recorded.
    EXPECT_EQ(steps.size(), 32u) << "rank " << t.rank;
    EXPECT_EQ(rss, 32u) << "rank " << t.rank;
    EXPECT_GE(buckets, 32u) << "rank " << t.rank;
  }
  for (int rank : {0, 1}) {
    EXPECT_GT(r.seconds(rank, ddp::Stage::transform, "loader/"), 0) << rank;
    EXPECT_GT(r.seconds(rank, ddp::Stage::disk_read, "loader/"), 0) << rank;
    EXPECT_GT(r.seconds(rank, ddp::Stage::collate, "loader/"), 0) << rank;
  }
  const nlohmann::json m = ddptest::read_json(r.dir + "/manifest.json");
  ASSERT_EQ(m["clock"]["ranks"].size(), 2u) << m.dump();
  for (const auto& rk : m["clock"]["ranks"]) {  // measured for every rank (rank 0 against itself: offset 0)
    EXPECT_EQ(rk["rounds"], 9) << rk.dump();
    EXPECT_GE(rk["uncertainty_ms"].get<double>(), 0) << rk.dump();
  }
  EXPECT_EQ(m["clock"]["ranks"][0]["offset_ms"], 0.0);
  // Bytes are known: bandwidth is reported, not "message sizes are not in the trace".
  for (const auto& rk : r.a["ranks"]) EXPECT_GT(rk["allreduce"]["bytes_per_step"].get<double>(), 0) << rk.dump();
  // A balanced run blames no data stage.
  for (const auto& c : r.a["causes"]) {
    const std::string st = c["stage"];
    EXPECT_TRUE(st != "transform" && st != "disk_read" && st != "collate" && st != "worker_start") << c.dump();
  }
}

TEST_F(UserDatapath, ASlowTransformOnOneRankIsNamedAtItsStageAndRank) {
  Recorded r = record("slow_transform", {"--slow-transform", "1:4"});
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json* c = r.top_cause();
  ASSERT_NE(c, nullptr) << r.a.dump();
  EXPECT_EQ((*c)["stage"], "transform") << cause_text(c);
  EXPECT_EQ((*c)["rank"], 1) << cause_text(c);
  EXPECT_NE(r.output.find("rank 1's loader is slow in transform"), std::string::npos) << r.output;
  // Which step of the Compose: the planted one (the script's Sleep step) costs the most.
  EXPECT_NE(r.output.find("; of it: Sleep "), std::string::npos) << r.output;
  // The replay of a user's run (workers, pin thread, buckets from the comm hook) gives its steps back.
  ASSERT_TRUE(r.a["replay"]["step_error_mean"].is_number()) << r.a["replay"].dump();
  EXPECT_LE(r.a["replay"]["step_error_mean"].get<double>(), 0.05) << r.a["replay"].dump();
}

TEST_F(UserDatapath, ASlowReadOnOneRankIsNamedAsTheRead) {
  Recorded r = record("slow_read", {"--slow-read", "0:4"});
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json* c = r.top_cause();
  ASSERT_NE(c, nullptr) << r.a.dump();
  EXPECT_EQ((*c)["stage"], "disk_read") << cause_text(c);
  EXPECT_EQ((*c)["rank"], 0) << cause_text(c);
}

// A loader that keeps up on average but whose every 12th or so batch pays 300 ms for its read (a shard fetched): the
// burst is named with the queue that would hide it, and the twin run with that prefetch_factor has no burst and a
// shorter step. How close the replay's price comes to the twin is bench/twins.py's (medians of three interleaved
// pairs, issue 51's bar 20 %): one pair on this shared machine is not a measurement (a planted run's compute here
// was 4 ms a step slower than its twin's, from nothing the replay is told). A bigger model (--width 64) gives
// compute ~25-30 ms a batch, so that two workers keep up with the burst's mean cost.
TEST_F(UserDatapath, ABurstyLoaderIsNamedWithTheQueueThatHidesItAndItsTwinConfirms) {
  const std::vector<std::string> job = {"--burst", "1:96:300", "--width", "64", "--images", "512"};
  Recorded r = record("burst", job);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json* c = r.top_cause();
  ASSERT_NE(c, nullptr) << r.a.dump();
  EXPECT_EQ((*c)["stage"], "disk_read") << cause_text(c);
  EXPECT_EQ((*c)["rank"], 1) << cause_text(c);
  EXPECT_NE((*c)["explanation"].get<std::string>().find("one batch in "), std::string::npos) << cause_text(c);
  EXPECT_TRUE(r.a["ranks"][1]["loader"]["burst"]["found"].get<bool>()) << r.a["ranks"][1].dump();
  EXPECT_FALSE(r.a["ranks"][0]["loader"]["burst"]["found"].get<bool>()) << r.a["ranks"][0].dump();
  ASSERT_TRUE((*c)["evidence"].contains("hidden_by")) << cause_text(c);
  const int prefetch = (*c)["evidence"]["burst"]["prefetch_to_hide"];
  const double predicted = (*c)["what_if_step_ms"];
  const double bursty = r.a["step_ms"];
  EXPECT_LT(predicted, bursty) << cause_text(c);

  std::vector<std::string> twin_job = job;
  twin_job.insert(twin_job.end(), {"--prefetch", std::to_string(prefetch)});
  Recorded twin = record("burst_hidden", twin_job);
  ASSERT_EQ(twin.code, 0) << twin.output;
  const double measured = twin.a["step_ms"];
  std::printf("burst: %.2f ms a step; prefetch=%d predicted %.2f, the twin measured %.2f\n", bursty, prefetch,
              predicted, measured);
  EXPECT_FALSE(twin.a["ranks"][1]["loader"]["burst"]["found"].get<bool>()) << twin.a["ranks"][1].dump();
  EXPECT_LT(measured, bursty) << twin.a.dump();
}

// One worker that cannot keep up: the loader is named, with how many workers would.
TEST_F(UserDatapath, TooFewWorkersAreNamedWithHowManyWouldKeepUp) {
  Recorded r = record("one_worker", {"--workers", "1", "--slow-transform", "0:3"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(r.flagged("loader_cannot_keep_up", 0)) << r.a["flags"].dump();
  EXPECT_NE(r.output.find("would keep up"), std::string::npos) << r.output;
  EXPECT_EQ(r.a["ranks"][0]["loader"]["workers"], 1);
}

// What if a loader waiting on slow storage had more workers: the replay's prediction from the one-worker run against
// the run that had them. Storage latency, not CPU: the workers do not contend for the cores (docs/stalls.md says
// what the replay leaves out and what a CPU-bound loader gives). Here the prediction must come at least three
// quarters of the way from the planted run to its twin; the bar of issues 43 and 51 (within 20 %) is held by
// bench/twins.py on medians of three interleaved pairs: one pair on this shared machine missed it in 2 of 5 suite
// runs (26.8 predicted for 18.9: rank 1's second forward held 147 ms by DDP's bucket rebuild while rank 0 waited
// for its first batches, a one-off the replay keeps in its mean; docs/stalls.md, "Warm-up").
TEST_F(UserDatapath, MoreWorkersArePredictedFromTheRunThatLackedThem) {
  Recorded r = record("slow_storage_1", {"--workers", "1", "--slow-read", "0:8"});
  ASSERT_EQ(r.code, 0) << r.output;
  auto w = ddptest::run({ddptest::kExe, "--what-if", "workers=4", r.dir, "--json"}, r.dir + ".what_if.log", 120);
  ASSERT_EQ(w.code, 0) << w.output;
  const nlohmann::json p = ddptest::printed_json(w.output);
  Recorded twin = record("slow_storage_4", {"--workers", "4", "--slow-read", "0:8"});
  ASSERT_EQ(twin.code, 0) << twin.output;
  const double predicted = p["step_ms"].get<double>(), measured = twin.a["step_ms"].get<double>();
  std::printf("workers=4: predicted %.2f ms from the one-worker run (%.2f ms); the four-worker run measured %.2f ms\n",
              predicted, p["measured_step_ms"].get<double>(), measured);
  EXPECT_LE(p["replay"]["step_error_mean"].get<double>(), 0.05) << p.dump(2);
  EXPECT_LT(predicted, 0.8 * p["measured_step_ms"].get<double>()) << p.dump(2);
  const double planted = p["measured_step_ms"].get<double>();
  EXPECT_LE(std::abs(predicted - measured), 0.25 * (planted - measured)) << p.dump(2);
}

// Workers that end with each epoch and take long to start: the epoch-start stall is the start-up's.
TEST_F(UserDatapath, WorkersRestartedEveryEpochAreNamedWithPersistentWorkers) {
  Recorded r = record("restart", {"--epochs", "3", "--no-persistent", "--worker-start", "0.6"});
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json* c = r.top_cause();
  ASSERT_NE(c, nullptr) << r.a.dump();
  EXPECT_EQ((*c)["stage"], "worker_start") << cause_text(c);
  EXPECT_NE(r.output.find("persistent_workers=True"), std::string::npos) << r.output;
  EXPECT_EQ(r.a["ranks"][0]["loader"]["passes_starting_workers"], 3);
}

// num_workers=0: the main process loads, and its fetch is split the same way, on the main lane.
TEST_F(UserDatapath, NoWorkersSplitsTheFetchOnTheMainThread) {
  Recorded r = record("no_workers", {"--workers", "0", "--slow-transform", "1:3"});
  ASSERT_EQ(r.code, 0) << r.output;
  // By construction: 128 images a rank and epoch, 2 epochs, 3 ms of spinning each in rank 1's Sleep step.
  EXPECT_GT(r.seconds(1, ddp::Stage::transform, "main"), 0.3);
  EXPECT_GT(r.seconds(0, ddp::Stage::disk_read, "main"), 0);
  const nlohmann::json* c = r.top_cause();
  ASSERT_NE(c, nullptr) << r.a.dump();
  EXPECT_EQ((*c)["stage"], "transform") << cause_text(c);
  EXPECT_EQ((*c)["rank"], 1) << cause_text(c);
  // Said as the user configured it: the training thread loads, no worker supplies.
  const std::string why = (*c)["explanation"];
  EXPECT_NE(why.find("the training thread loads each batch itself (num_workers=0)"), std::string::npos) << why;
  EXPECT_EQ(why.find("0 worker(s) supply"), std::string::npos) << why;
}

}  // namespace
