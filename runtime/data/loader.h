#pragma once
// The input pipeline of one rank: persistent worker threads that each read their batches from disk (disk_read),
// normalise them (transform) and copy them into staging buffers (pin: page-locked when the runtime provides a pinned
// allocator), like a torch DataLoader with num_workers=W and prefetch_factor=P: batch b is built by worker b % W and
// handed to the compute thread strictly in order. Each worker owns P staging slots, so a worker can never starve the
// one whose batch the compute thread waits for.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/data/dataset.h"

namespace ddp {

struct LoaderOptions {
  int workers = 2;
  int prefetch = 2;
  int64_t batch_size = 64;
  int accum_steps = 1;  // to stamp loader spans with the optimizer step their batch feeds
  double slow_disk_read_ms = 0, slow_transform_ms = 0, slow_pin_ms = 0;
};

// Allocates/frees staging memory (pinned host memory on CUDA builds, plain memory otherwise).
struct StagingAllocator {
  std::function<void*(size_t)> allocate;
  std::function<void(void*)> release;
};

struct StagedBatch {
  int64_t index = -1;  // batch index inside the epoch
  size_t samples = 0;
  float* x = nullptr;            // samples x sample_floats, normalised
  int64_t* y = nullptr;          // labels
  std::vector<int64_t> indices;  // the dataset indices in this batch (for the sharding check)
  uint64_t bytes = 0;            // bytes staged
  int worker = -1, slot = -1;
};

class Loader {
 public:
  Loader(const Dataset& data, const LoaderOptions& opt, StagingAllocator alloc);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Hands the workers one epoch's batches (each a list of dataset indices). first_step = optimizer step of batch 0.
  void start_epoch(uint16_t epoch, uint32_t first_step, std::vector<std::vector<int64_t>> batches);
  // The next batch in order, or nullptr when the epoch is exhausted. Blocks while it is not ready; rethrows a
  // worker's exception. The batch stays valid until release().
  StagedBatch* next();
  void release(StagedBatch* b);
  int ready_batches();

 private:
  struct Worker {
    std::thread thread;
    std::vector<StagedBatch> slots;
    std::vector<bool> slot_free;
    RawBatch raw;          // disk_read's output
    std::vector<float> x;  // transform's output
    // This worker's own wake-up: one of its slots came back, a new epoch, or stop. One per worker, so a released
    // slot wakes only its owner: with one shared condition variable every release and every ready batch woke every
    // worker and the training thread, on a 2-core machine while the rank sits in its collective.
    std::unique_ptr<std::condition_variable> wake = std::make_unique<std::condition_variable>();
  };
  void worker_loop(int w);
  void produce(int w, int64_t b, StagedBatch& slot);
  StagedBatch* take_slot(int w, std::unique_lock<std::mutex>& lock);

  const Dataset& data_;
  LoaderOptions opt_;
  StagingAllocator alloc_;
  std::vector<Worker> workers_;
  std::mutex mu_;
  std::condition_variable batch_ready_;  // the training thread's wake-up: a batch is ready, or a worker failed
  void wake_workers();                   // every worker (epoch change, stop); mu_ held or not
  // epoch state (guarded by mu_)
  uint64_t epoch_serial_ = 0;
  uint16_t epoch_ = 0;
  uint32_t first_step_ = 0;
  std::vector<std::vector<int64_t>> batches_;
  std::vector<StagedBatch*> ready_;  // by batch index
  int64_t next_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  Worker inline_;  // workers == 0: the compute thread loads its own batches
};

}  // namespace ddp
