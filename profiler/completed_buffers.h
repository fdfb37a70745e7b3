#pragma once
// The hand-over between a tracer's callback thread and the thread that reads what it recorded (Kineto's split): the
// callback only queues a filled buffer and returns; the reader takes the queue and translates the records at leisure.
// The queue is bounded: a reader that falls behind costs a counted loss, never unbounded memory. Nothing here needs
// CUDA; the CUPTI source (cupti_source.cpp) is its user.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ddp::prof {

// A buffer the tracer filled: `valid` bytes of records at `data` (allocated with std::malloc/aligned_alloc).
struct CompletedBuffer {
  uint8_t* data = nullptr;
  size_t valid = 0;
};

class CompletedBuffers {
 public:
  enum class Offer { queued, full, closed };

  explicit CompletedBuffers(size_t max_buffers) : max_buffers_(max_buffers) {}
  ~CompletedBuffers();
  CompletedBuffers(const CompletedBuffers&) = delete;
  CompletedBuffers& operator=(const CompletedBuffers&) = delete;

  // Accepts buffers from now on (frees any a previous recording left behind).
  void open();
  // Refuses buffers from now on; those queued stay for take().
  void close();
  // The callback's thread: queues `b` and takes ownership, or returns why not (the caller still owns `b`: it counts
  // the loss and frees it).
  Offer offer(CompletedBuffer b);
  // Everything queued, oldest first; the caller owns the buffers now.
  std::vector<CompletedBuffer> take();

  // Records lost on the way (the tracer's own drops, buffers refused while full), for ActivitySource::dropped().
  void count_lost(uint64_t records) { lost_.fetch_add(records, std::memory_order_relaxed); }
  uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }
  size_t max_buffers() const { return max_buffers_; }

 private:
  void free_queued();  // under mu_

  const size_t max_buffers_;
  std::mutex mu_;
  std::vector<CompletedBuffer> queue_;
  bool open_ = false;
  std::atomic<uint64_t> lost_{0};
};

}  // namespace ddp::prof
