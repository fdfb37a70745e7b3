// Threads started inside a BatchSchedulingScope run SCHED_BATCH; the starting thread gets its normal policy back, and
// threads started outside the scope or with it disabled keep the normal policy. Real threads, read back from the
// kernel.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/launch/environment/batch_scheduling.h"

using namespace ddp;

namespace {
// A thread that reports its own policy and then stays alive until released (so it can be counted).
struct ParkedThread {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> policy{-2};
  std::thread t;
  void start() {
    t = std::thread([this] {
      policy = ::sched_getscheduler(0);
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [this] { return release; });
    });
    while (policy == -2) std::this_thread::yield();
  }
  ~ParkedThread() {
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
    t.join();
  }
};
}  // namespace

TEST(BatchScheduling, ThreadsStartedInTheScopeRunBatchAndTheCallerGetsItsPolicyBack) {
  ASSERT_EQ(::sched_getscheduler(0), SCHED_OTHER);
  const int before = batch_scheduled_threads();
  ParkedThread inside, outside, disabled;
  {
    BatchSchedulingScope scope(true);
    ASSERT_TRUE(scope.error().empty()) << scope.error();
    EXPECT_EQ(::sched_getscheduler(0), SCHED_BATCH);
    inside.start();
  }
  EXPECT_EQ(::sched_getscheduler(0), SCHED_OTHER) << "the caller's own policy is restored";
  outside.start();
  {
    BatchSchedulingScope off(false);
    disabled.start();
  }
  EXPECT_EQ(inside.policy, SCHED_BATCH);
  EXPECT_EQ(outside.policy, SCHED_OTHER);
  EXPECT_EQ(disabled.policy, SCHED_OTHER);
  EXPECT_EQ(batch_scheduled_threads(), before + 1) << "counted from the kernel: only the thread started inside";
}

TEST(BatchScheduling, AnotherPolicyChosenForTheProcessIsLeftAlone) {
  const sched_param zero{};
  ASSERT_EQ(::sched_setscheduler(0, SCHED_IDLE, &zero), 0);
  {
    BatchSchedulingScope scope(true);
    EXPECT_EQ(::sched_getscheduler(0), SCHED_IDLE);
  }
  EXPECT_EQ(::sched_getscheduler(0), SCHED_IDLE);
  // Back to normal for the tests after this one (root may raise priority back; an unprivileged run may not).
  if (::sched_setscheduler(0, SCHED_OTHER, &zero) != 0) GTEST_SKIP() << "cannot leave SCHED_IDLE without privileges";
}
