// GradSync with a fake collective, so the two ways a work's wait() behaves can be driven by hand: blocking until the
// collective is done (Gloo), and returning at once while it still runs (NCCL, where only the stream waits).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "profiler/clock.h"
#include "profiler/recorder.h"
#include "runtime/train/grad_sync.h"
#include "traces/native/trace_reader.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;
using namespace std::chrono_literals;

// A collective that finishes when the test says so. world = 1, so the reduced values are the inputs.
struct FakeWork : c10d::Work {
  explicit FakeWork(bool blocking_wait) : blocking(blocking_wait) {}
  bool isCompleted() override { return done.load(); }
  bool wait(std::chrono::milliseconds) override {
    if (!done.load()) waited_unfinished = true;
    while (blocking && !done.load()) std::this_thread::sleep_for(50us);
    return true;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mu);
    return done.load() ? error : nullptr;
  }
  void finish(std::exception_ptr e = nullptr) {
    {
      std::lock_guard<std::mutex> lock(mu);
      error = e;
    }
    done.store(true);
  }
  const bool blocking;
  std::atomic<bool> done{false};
  std::atomic<bool> waited_unfinished{false};  // wait() was entered before the collective was done
  mutable std::mutex mu;
  std::exception_ptr error;
};

struct Collective {
  explicit Collective(bool blocking) : blocking(blocking) {}
  GradSync::Allreduce fn() {
    return [this](std::vector<at::Tensor>&) {
      auto w = c10::make_intrusive<FakeWork>(blocking);
      std::lock_guard<std::mutex> lock(mu);
      works.push_back(w);
      return c10::intrusive_ptr<c10d::Work>(w);
    };
  }
  std::vector<c10::intrusive_ptr<FakeWork>> launched() {
    std::lock_guard<std::mutex> lock(mu);
    return works;
  }
  const bool blocking;
  std::mutex mu;
  std::vector<c10::intrusive_ptr<FakeWork>> works;
};

// Starts the recorder into a fresh trace file; returns its path.
std::string start_recording(const char* name) {
  auto d = fs::temp_directory_path() / ("ddp_grad_sync_" + std::to_string(::getpid()));
  fs::create_directories(d);
  prof::RecorderConfig cfg;
  cfg.path = (d / name).string();
  cfg.flush_ms = 5;
  std::string err;
  EXPECT_TRUE(prof::start(cfg, err)) << err;
  return cfg.path;
}

// Two parameters in one bucket; one backward of a tiny linear model.
struct Model {
  torch::Tensor w = torch::randn({4, 3}).requires_grad_();
  torch::Tensor b = torch::randn({3}).requires_grad_();
  void backward() { (torch::mm(torch::ones({2, 4}), w) + b).sum().backward(); }
};

std::vector<Event> allreduce_spans(const std::string& path) {
  auto r = read_trace_file(path);
  EXPECT_TRUE(r.ok()) << r.message;
  std::vector<Event> out;
  for (const Event& e : r.trace.events)
    if (e.is_span() && e.stage_id() == Stage::allreduce) out.push_back(e);
  return out;
}

TEST(GradSync, NonBlockingWaitLetsFinishReturnAndTheSpanEndsAtCompletion) {
  const std::string path = start_recording("nonblocking.ddpt");
  Model m;
  Collective c(/*blocking=*/false);
  int64_t finish_returned = 0, completed_at = 0;
  {
    GradSync sync({m.w, m.b}, c.fn(), /*world=*/1, /*bucket_mb=*/25);
    ASSERT_EQ(sync.bucket_count(), 1u);
    sync.begin_backward(true, prof::StepContext{7, 0, 0});
    m.backward();
    sync.finish();  // must not wait for the collective itself: on NCCL the stream does
    finish_returned = prof::monotonic_ns();
    ASSERT_EQ(c.launched().size(), 1u);
    EXPECT_FALSE(c.launched()[0]->done.load());
    EXPECT_TRUE(torch::equal(m.w.grad(), torch::ones({4, 3}) * 2)) << "the reduced values were written back";
    completed_at = prof::monotonic_ns();
    c.launched()[0]->finish();
  }  // the comm thread drains what completed before GradSync goes away
  prof::stop();
  auto spans = allreduce_spans(path);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].step, 7u);
  EXPECT_EQ(spans[0].value, (4u * 3 + 3) * sizeof(float));
  // Event order, not durations (the machines are shared): launched before finish() returned, ended only after the
  // collective completed, which happened after finish() had returned.
  EXPECT_LT(spans[0].t0, finish_returned);
  EXPECT_GE(spans[0].t1, completed_at) << "the span ends when the collective completed, not when wait() returned";
}

TEST(GradSync, BlockingWaitEndsTheSpanRightAfterWait) {
  const std::string path = start_recording("blocking.ddpt");
  Model m;
  Collective c(/*blocking=*/true);
  int64_t completed_at = 0, finish_returned = 0;
  {
    GradSync sync({m.w, m.b}, c.fn(), 1, 25);
    sync.begin_backward(true, prof::StepContext{3, 0, 0});
    m.backward();
    std::thread finisher([&] {
      while (c.launched().empty()) std::this_thread::sleep_for(100us);
      std::this_thread::sleep_for(20ms);
      completed_at = prof::monotonic_ns();
      c.launched()[0]->finish();
    });
    sync.finish();  // Gloo: returns only once the collective is done
    finish_returned = prof::monotonic_ns();
    EXPECT_TRUE(c.launched()[0]->done.load());
    finisher.join();
  }
  prof::stop();
  auto spans = allreduce_spans(path);
  ASSERT_EQ(spans.size(), 1u);
  // Ordered: the collective completed, then the span ended, then finish() returned.
  EXPECT_GE(spans[0].t1, completed_at);
  EXPECT_LE(spans[0].t1, finish_returned);
}

// The gradients are views of the buckets (nothing copied in or out); a gradient an optimizer dropped (set_to_none)
// is copied in and back, so the result never depends on it; zero_grad() restores the views.
TEST(GradSync, GradientsAreBucketViewsAndADroppedOneIsStillReduced) {
  Model m;
  Collective c(/*blocking=*/true);
  std::thread finisher;
  GradSync sync({m.w, m.b}, c.fn(), 1, 25);
  auto finish_all = [&] {
    finisher = std::thread([&] {
      while (c.launched().empty()) std::this_thread::sleep_for(100us);
      for (auto& w : c.launched()) w->finish();
    });
    sync.finish();
    finisher.join();
  };
  const void* w_grad = m.w.grad().data_ptr();
  sync.begin_backward(true, prof::StepContext{});
  m.backward();
  finish_all();
  EXPECT_EQ(m.w.grad().data_ptr(), w_grad) << "backward accumulated into the bucket view";
  EXPECT_TRUE(torch::equal(m.w.grad(), torch::ones({4, 3}) * 2));

  sync.zero_grad();
  EXPECT_EQ(m.w.grad().data_ptr(), w_grad);
  EXPECT_EQ(m.w.grad().abs().sum().item<float>(), 0.0f);

  m.w.mutable_grad() = torch::Tensor();  // what zero_grad(set_to_none=true) does
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.works.clear();
  }
  sync.begin_backward(true, prof::StepContext{});
  m.backward();
  finish_all();
  EXPECT_TRUE(torch::equal(m.w.grad(), torch::ones({4, 3}) * 2)) << "a dropped gradient is reduced too";
  sync.zero_grad();
  EXPECT_EQ(m.w.grad().data_ptr(), w_grad) << "zero_grad puts the view back";
}

TEST(GradSync, AFailedCollectiveSeenByPollingFailsTheNextSync) {
  Model m;
  Collective c(/*blocking=*/false);
  GradSync sync({m.w, m.b}, c.fn(), 1, 25);
  sync.begin_backward(true, prof::StepContext{});
  m.backward();
  sync.finish();
  c.launched()[0]->finish(std::make_exception_ptr(std::runtime_error("NCCL communicator was aborted")));
  std::this_thread::sleep_for(20ms);
  m.w.mutable_grad().zero_();
  m.b.mutable_grad().zero_();
  sync.begin_backward(true, prof::StepContext{});
  m.backward();
  try {
    sync.finish();
    FAIL() << "a failed collective must end the rank";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
}

}  // namespace

// The bucket is averaged before the sum, as DDP divides it; for a power-of-two world GradSync multiplies by 1/world
// instead, which must give the same floats bit for bit, subnormals and huge values included (the identity collective
// here leaves exactly the averaged gradient).
TEST(GradSync, AveragingEqualsDivisionByTheWorldBitForBit) {
  torch::manual_seed(3);
  torch::Tensor g = torch::cat({torch::randn({4096}), torch::randn({4096}) * 1e-39, torch::randn({64}) * 3e38,
                                torch::tensor({1e-45f, -1e-45f, 3e-45f, 0.0f})});
  // (No -0.0: backward accumulates into the zeroed bucket, and +0 + -0 is +0, with a division or without.)
  for (int world : {2, 3, 4, 8}) {
    torch::Tensor p = torch::zeros_like(g).requires_grad_();
    Collective c(/*blocking=*/true);
    GradSync sync({p}, c.fn(), world, 25);
    sync.begin_backward(true, prof::StepContext{});
    (p * g).sum().backward();
    std::thread finisher([&] {
      while (c.launched().empty()) std::this_thread::sleep_for(100us);
      for (auto& w : c.launched()) w->finish();
    });
    sync.finish();
    finisher.join();
    const torch::Tensor want = g.div(world);
    EXPECT_TRUE(torch::equal(p.grad().view(torch::kInt32), want.view(torch::kInt32))) << "world " << world;
  }
}

// With a poll budget, finish() sees a blocking (Gloo) collective complete by polling and never enters wait() while
// it is still running; without one, or on non-blocking (NCCL) works, it goes straight to wait().
TEST(GradSync, PollsABlockingCollectiveBeforeBlockingOnIt) {
  struct Case {
    bool blocking;
    std::chrono::microseconds budget;
    bool expect_wait_unfinished;
  };
  for (const Case& k : {Case{true, 2s, false}, Case{true, 0us, true}, Case{false, 2s, true}}) {
    Model m;
    Collective c(k.blocking);
    GradSync sync({m.w, m.b}, c.fn(), 1, 25, k.blocking);
    sync.poll_before_blocking(k.budget);
    sync.begin_backward(true, prof::StepContext{});
    m.backward();
    std::thread finisher([&] {
      while (c.launched().empty()) std::this_thread::sleep_for(100us);
      std::this_thread::sleep_for(20ms);  // finish() is polling or waiting by now
      for (auto& w : c.launched()) w->finish();
    });
    sync.finish();
    finisher.join();
    ASSERT_EQ(c.launched().size(), 1u);
    EXPECT_EQ(c.launched()[0]->waited_unfinished.load(), k.expect_wait_unfinished)
        << "blocking " << k.blocking << ", budget " << k.budget.count() << " us";
  }
}
