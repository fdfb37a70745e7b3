// The one hang rule and blame order both heartbeat watchers apply (runtime/launch/heartbeat/hang_watch.h), on planted
// heartbeats: each ordering rule shown to decide, and the second look shown to hold a hang back.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/launch/heartbeat/hang_watch.h"

namespace {
using ddp::HangWatch;
using ddp::ProgressSnapshot;
using ddp::RunningRank;

constexpr int64_t kS = 1000000000;
constexpr int64_t kNow = 1000 * kS;

RunningRank rank(int r, double silent_s, ddp::Stage stage = ddp::Stage::forward, int64_t step = 5,
                 const std::string& reason = "", bool stopped = false) {
  RunningRank x;
  x.rank = r;
  x.beat.present = true;
  x.beat.state = ddp::RankState::running;
  x.beat.stage = static_cast<int32_t>(stage);
  x.beat.step = step;
  x.beat.last_ns = kNow - static_cast<int64_t>(silent_s * 1e9);
  x.beat.median_step_ns = kS / 100;  // 10 ms steps: the adaptive limit is its floor, 10 s
  x.beat.reason = reason;
  x.process_stopped = stopped;
  return x;
}

// Polls twice, kConfirmS apart, with the same heartbeats: what the watcher names.
int named(HangWatch& w, const std::vector<RunningRank>& ranks) {
  double silent = 0;
  EXPECT_EQ(w.poll(ranks, kNow, silent), -1) << "a hang is never called on its first sighting";
  std::this_thread::sleep_for(std::chrono::duration<double>(HangWatch::kConfirmS + 0.05));
  return w.poll(ranks, kNow, silent);
}

TEST(HangWatch, NothingSilentPastTheLimitIsNoHang) {
  HangWatch w(0);
  EXPECT_EQ(named(w, {rank(0, 9.0), rank(1, 9.5)}), -1);
  EXPECT_DOUBLE_EQ(w.timeout_s(), 10.0);
  HangWatch fixed(5);
  EXPECT_EQ(named(fixed, {rank(0, 1.0), rank(1, 5.5)}), 1) << "the user's timeout replaces the adaptive one";
}

TEST(HangWatch, TheBlameOrderDecides) {
  HangWatch a(0);  // a stopped process before a rank silent longer
  EXPECT_EQ(named(a, {rank(0, 30), rank(1, 12, ddp::Stage::forward, 5, "", true)}), 1);
  HangWatch b(0);  // a rank that says why before one silent longer
  EXPECT_EQ(named(b, {rank(0, 30), rank(1, 12, ddp::Stage::forward, 5, "injected hang at step 5")}), 1);
  HangWatch c(0);  // the one furthest behind
  EXPECT_EQ(named(c, {rank(0, 30, ddp::Stage::forward, 6), rank(1, 12, ddp::Stage::forward, 5)}), 1);
  HangWatch d(0);  // among equals, the one silent longest
  EXPECT_EQ(named(d, {rank(0, 12), rank(1, 30)}), 1);
}

TEST(HangWatch, ARankWaitingInACollectiveIsThePeersVictim) {
  // Rank 0 waits in allreduce longer than rank 1 has been busy in forward: rank 1 is named once its own silence
  // passes the limit, not rank 0 before it.
  HangWatch w(0);
  EXPECT_EQ(named(w, {rank(0, 15, ddp::Stage::allreduce), rank(1, 8)}), -1);
  HangWatch later(0);
  EXPECT_EQ(named(later, {rank(0, 15, ddp::Stage::allreduce), rank(1, 11)}), 1);
  HangWatch stuck(0);  // twice the limit in a collective ends the wait regardless
  EXPECT_EQ(named(stuck, {rank(0, 21, ddp::Stage::allreduce), rank(1, 8)}), 0);
}

TEST(HangWatch, ProgressBetweenTheLooksIsNoHang) {
  HangWatch w(5);
  double silent = 0;
  std::vector<RunningRank> ranks = {rank(0, 6)};
  EXPECT_EQ(w.poll(ranks, kNow, silent), -1);
  std::this_thread::sleep_for(std::chrono::duration<double>(HangWatch::kConfirmS + 0.05));
  ranks[0].beat.last_ns += 1;  // a half-written time read first, the real one after
  EXPECT_EQ(w.poll(ranks, kNow, silent), -1) << "the newest progress moved: look again";
  std::this_thread::sleep_for(std::chrono::duration<double>(HangWatch::kConfirmS + 0.05));
  EXPECT_EQ(w.poll(ranks, kNow, silent), 0);
  EXPECT_GT(silent, 5.0);
}

TEST(HangWatch, FailedRanksAreBlamedCauseFirst) {
  ProgressSnapshot says, silent, lost;
  says.reason = "ValueError: bad batch";
  says.last_ns = 300;
  silent.last_ns = 100;  // died without a word, earlier
  lost.reason = "Connection closed by peer";
  lost.last_ns = 50;  // a lost peer, earliest
  EXPECT_TRUE(ddp::blamed_before(says, silent));
  EXPECT_TRUE(ddp::blamed_before(silent, lost));
  ProgressSnapshot earlier = silent;
  earlier.last_ns = 10;
  EXPECT_TRUE(ddp::blamed_before(earlier, silent)) << "among equals, the one that stopped first";
}

}  // namespace
