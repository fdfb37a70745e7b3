#pragma once
// The offline commands' progress bar: while a command reads traces (trace_read_progress(),
// traces/base/read_progress.h), a thread redraws one line on stderr — only on a terminal, and only once the reading has
// taken a second, so quick commands and logs stay as they were.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace ddp {

class ReadProgressBar {
 public:
  // Starts a reading of about `total_bytes`, described as `what` ("reading", "exporting").
  ReadProgressBar(std::string what, uint64_t total_bytes);
  ~ReadProgressBar();  // stops the thread and clears the line
  ReadProgressBar(const ReadProgressBar&) = delete;
  ReadProgressBar& operator=(const ReadProgressBar&) = delete;

 private:
  void run();
  std::string what_;
  std::atomic<bool> stop_{false};
  bool drawn_ = false;
  std::thread thread_;
};

}  // namespace ddp
