#include "runtime/data/loader.h"

#include <chrono>
#include <cstring>

#include "profiler/span.h"
#include "runtime/common/sleep.h"

namespace ddp {

Loader::Loader(const Dataset& data, const LoaderOptions& opt, StagingAllocator alloc)
    : data_(data), opt_(opt), alloc_(std::move(alloc)) {
  const int nworkers = std::max(opt_.workers, 0);
  const size_t fx = static_cast<size_t>(opt_.batch_size * data_.sample_floats());
  auto make_slots = [&](Worker& w, int worker_id, int count) {
    w.slots.resize(count);
    w.slot_free.assign(count, true);
    for (int s = 0; s < count; ++s) {
      w.slots[s].x = static_cast<float*>(alloc_.allocate(fx * sizeof(float)));
      w.slots[s].y = static_cast<int64_t*>(alloc_.allocate(opt_.batch_size * sizeof(int64_t)));
      w.slots[s].worker = worker_id;
      w.slots[s].slot = s;
    }
    w.x.resize(fx);
  };
  workers_.resize(nworkers);
  for (int w = 0; w < nworkers; ++w) make_slots(workers_[w], w, opt_.prefetch);
  if (nworkers == 0) make_slots(inline_, -1, 1);
  for (int w = 0; w < nworkers; ++w) workers_[w].thread = std::thread(&Loader::worker_loop, this, w);
}

void Loader::wake_workers() {
  for (Worker& w : workers_) w.wake->notify_one();
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_workers();
  batch_ready_.notify_all();
  for (auto& w : workers_)
    if (w.thread.joinable()) w.thread.join();
  auto free_slots = [&](Worker& w) {
    for (auto& s : w.slots) {
      alloc_.release(s.x);
      alloc_.release(s.y);
    }
  };
  for (auto& w : workers_) free_slots(w);
  free_slots(inline_);
}

void Loader::start_epoch(uint16_t epoch, uint32_t first_step, std::vector<std::vector<int64_t>> batches) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (StagedBatch* b : ready_)
      if (b && b->worker >= 0) workers_[b->worker].slot_free[b->slot] = true;
    epoch_ = epoch;
    first_step_ = first_step;
    batches_ = std::move(batches);
    ready_.assign(batches_.size(), nullptr);
    next_ = 0;
    ++epoch_serial_;
  }
  wake_workers();
}

void Loader::produce(int w, int64_t b, StagedBatch& slot) {
  Worker& wk = w >= 0 ? workers_[w] : inline_;
  const std::vector<int64_t>& idx = batches_[b];
  const size_t n = idx.size();
  const size_t F = static_cast<size_t>(data_.sample_floats());
  prof::StepContext ctx{first_step_ + static_cast<uint32_t>(b / opt_.accum_steps), epoch_,
                        static_cast<uint8_t>(b % opt_.accum_steps)};
  uint64_t bytes;
  {
    prof::Span span(Stage::disk_read, &ctx);
    bytes = data_.read(idx.data(), n, wk.raw);
    sleep_ms(opt_.slow_disk_read_ms);
    span.bytes(bytes);
    span.item(static_cast<uint32_t>(b));
  }
  {
    prof::Span span(Stage::transform, &ctx);
    data_.transform(wk.raw, idx.data(), n, epoch_, wk.x.data());
    sleep_ms(opt_.slow_transform_ms);
    span.item(static_cast<uint32_t>(b));
  }
  {
    prof::Span span(Stage::pin, &ctx);
    std::memcpy(slot.x, wk.x.data(), n * F * sizeof(float));
    std::memcpy(slot.y, wk.raw.labels.data(), n * sizeof(int64_t));
    slot.bytes = n * (F * sizeof(float) + sizeof(int64_t));
    sleep_ms(opt_.slow_pin_ms);
    span.bytes(slot.bytes);
    span.item(static_cast<uint32_t>(b));
  }
  slot.index = b;
  slot.samples = n;
  slot.indices = idx;
}

StagedBatch* Loader::take_slot(int w, std::unique_lock<std::mutex>& lock) {
  Worker& wk = workers_[w];
  for (;;) {
    // stop_ is checked before every wait: the destructor's notify may have come while this worker was producing.
    if (stop_) return nullptr;
    for (size_t s = 0; s < wk.slots.size(); ++s)
      if (wk.slot_free[s]) {
        wk.slot_free[s] = false;
        return &wk.slots[s];
      }
    wk.wake->wait(lock);
  }
}

void Loader::worker_loop(int w) {
  prof::name_this_thread("loader/" + std::to_string(w));
  const int W = static_cast<int>(workers_.size());
  uint64_t seen_serial = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    workers_[w].wake->wait(lock, [&] { return stop_ || epoch_serial_ != seen_serial; });
    if (stop_) break;
    seen_serial = epoch_serial_;
    for (int64_t b = w; b < static_cast<int64_t>(batches_.size()); b += W) {
      StagedBatch* slot = take_slot(w, lock);
      if (!slot || epoch_serial_ != seen_serial) {
        if (slot) workers_[w].slot_free[slot->slot] = true;
        break;
      }
      lock.unlock();
      try {
        produce(w, b, *slot);
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        batch_ready_.notify_all();
        return;
      }
      lock.lock();
      if (epoch_serial_ != seen_serial) {  // the epoch was abandoned while we worked
        workers_[w].slot_free[slot->slot] = true;
        break;
      }
      ready_[b] = slot;
      batch_ready_.notify_one();  // only the training thread waits for batches
    }
  }
}

StagedBatch* Loader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_ >= static_cast<int64_t>(batches_.size())) return nullptr;
  const int64_t b = next_;
  if (workers_.empty()) {
    StagedBatch* slot = &inline_.slots[0];
    lock.unlock();
    produce(-1, b, *slot);
    lock.lock();
    ++next_;
    return slot;
  }
  batch_ready_.wait(lock, [&] { return ready_[b] != nullptr || error_ || stop_; });
  if (error_) std::rethrow_exception(error_);
  StagedBatch* s = ready_[b];
  ready_[b] = nullptr;
  ++next_;
  return s;
}

void Loader::release(StagedBatch* b) {
  if (!b || b->worker < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_[b->worker].slot_free[b->slot] = true;
  }
  workers_[b->worker].wake->notify_one();
}

int Loader::ready_batches() {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (int64_t b = next_; b < static_cast<int64_t>(ready_.size()); ++b) n += ready_[b] != nullptr;
  return n;
}

}  // namespace ddp
