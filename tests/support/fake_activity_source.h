#pragma once
// An ActivitySource driven by tests (Kineto keeps its mock beside its tests, not in the library): `push` queues
// records (their names are copied), flush/stop deliver them in order, and the clock is a settable linear function of
// CLOCK_MONOTONIC (or identity).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/clock.h"
#include "profiler/gpu_activity.h"

namespace ddp::testing {

class FakeActivitySource final : public prof::ActivitySource {
 public:
  struct Control {
    std::mutex mu;
    std::vector<std::vector<prof::ActivityRecord>> batches;  // delivered one batch per sink call
    std::vector<std::unique_ptr<std::string>> names;
    bool fail_start = false;
    std::string fail_reason = "fake source: told to fail";
    bool identity_clock = false;
    int64_t clock_offset_ns = 0;  // source_ts = monotonic + offset (when not identity)
    uint64_t dropped = 0;
    int flushes = 0;
    bool started = false, stopped = false;
  };

  explicit FakeActivitySource(std::shared_ptr<Control> c) : c_(std::move(c)) {}

  const char* name() const override { return "fake"; }

  bool start(prof::RecordSink sink, std::string& error) override {
    std::lock_guard<std::mutex> lock(c_->mu);
    if (c_->fail_start) {
      error = c_->fail_reason;
      return false;
    }
    sink_ = std::move(sink);
    c_->started = true;
    return true;
  }

  void flush(bool /*force*/) override {
    std::vector<std::vector<prof::ActivityRecord>> batches;
    {
      std::lock_guard<std::mutex> lock(c_->mu);
      if (!c_->started || c_->stopped) return;
      ++c_->flushes;
      batches.swap(c_->batches);
    }
    for (const auto& b : batches) sink_(b.data(), b.size());
  }

  void stop() override {
    flush(true);
    std::lock_guard<std::mutex> lock(c_->mu);
    c_->stopped = true;
  }

  bool clock_pair(uint64_t& source_ts, int64_t& monotonic) override {
    std::lock_guard<std::mutex> lock(c_->mu);
    if (c_->identity_clock) return false;
    monotonic = prof::monotonic_ns();
    source_ts = static_cast<uint64_t>(monotonic + c_->clock_offset_ns);
    return true;
  }

  uint64_t dropped() const override {
    std::lock_guard<std::mutex> lock(c_->mu);
    return c_->dropped;
  }

  // Queues one batch. A record's name is a view, so the text is copied into storage that outlives delivery.
  static void push(Control& c, std::vector<prof::ActivityRecord> batch) {
    std::lock_guard<std::mutex> lock(c.mu);
    for (auto& r : batch) {
      if (r.name.empty()) continue;
      c.names.push_back(std::make_unique<std::string>(r.name));
      r.name = *c.names.back();
    }
    c.batches.push_back(std::move(batch));
  }

 private:
  std::shared_ptr<Control> c_;
  prof::RecordSink sink_;
};

}  // namespace ddp::testing
