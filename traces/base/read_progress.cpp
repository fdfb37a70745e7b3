#include "traces/base/read_progress.h"

#include <algorithm>

namespace ddp {

void ReadProgress::start(uint64_t total) {
  done_.store(0, std::memory_order_relaxed);
  total_.store(total, std::memory_order_relaxed);
  reading("");
}

void ReadProgress::reading(const std::string& file) {
  std::lock_guard<std::mutex> lock(file_mutex_);
  file_ = file;
}

std::string ReadProgress::file() const {
  std::lock_guard<std::mutex> lock(file_mutex_);
  return file_;
}

double ReadProgress::fraction() const {
  const uint64_t t = total();
  if (t == 0) return 0;
  return std::min(0.99, static_cast<double>(done()) / static_cast<double>(t));
}

ReadProgress& trace_read_progress() {
  static ReadProgress p;
  return p;
}

}  // namespace ddp
