#pragma once
// How far this process's readers are through what they were asked to read, for a progress bar: the command line's
// bar on a terminal and the viewer's loading line poll it from another thread while the readers add to it. Relaxed
// atomics: a bar needs no ordering, and a reader pays one atomic add per piece of ~64 KiB.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace ddp {

class ReadProgress {
 public:
  // A new reading of about `total` bytes (an estimate: a gzip file's inflated size is known only roughly).
  void start(uint64_t total);
  void advance(uint64_t bytes) { done_.fetch_add(bytes, std::memory_order_relaxed); }
  void reading(const std::string& file);  // the file a reader has just begun
  uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  uint64_t total() const { return total_.load(std::memory_order_relaxed); }
  std::string file() const;
  // done/total in [0, 1), below 1 until the reading ends (the total is an estimate).
  double fraction() const;

 private:
  std::atomic<uint64_t> done_{0}, total_{0};
  mutable std::mutex file_mutex_;
  std::string file_;
};

// The process's one instance: readers in traces/ report to it without being handed it.
ReadProgress& trace_read_progress();

}  // namespace ddp
