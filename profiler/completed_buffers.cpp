#include "profiler/completed_buffers.h"

#include <cstdlib>

namespace ddp::prof {

CompletedBuffers::~CompletedBuffers() {
  std::lock_guard<std::mutex> lock(mu_);
  free_queued();
}

void CompletedBuffers::open() {
  std::lock_guard<std::mutex> lock(mu_);
  free_queued();
  open_ = true;
}

void CompletedBuffers::close() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = false;
}

CompletedBuffers::Offer CompletedBuffers::offer(CompletedBuffer b) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return Offer::closed;
  if (queue_.size() >= max_buffers_) return Offer::full;
  queue_.push_back(b);
  return Offer::queued;
}

std::vector<CompletedBuffer> CompletedBuffers::take() {
  std::vector<CompletedBuffer> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(queue_);
  return out;
}

void CompletedBuffers::free_queued() {
  for (CompletedBuffer& b : queue_) std::free(b.data);
  queue_.clear();
}

}  // namespace ddp::prof
