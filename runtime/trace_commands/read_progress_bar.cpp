#include "runtime/trace_commands/read_progress_bar.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "traces/base/read_progress.h"

namespace ddp {
namespace {

constexpr auto kQuietFor = std::chrono::seconds(1);  // readings shorter than this draw nothing
constexpr auto kRedrawEvery = std::chrono::milliseconds(200);
constexpr int kBarWidth = 30;

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

ReadProgressBar::ReadProgressBar(std::string what, uint64_t total_bytes) : what_(std::move(what)) {
  trace_read_progress().start(total_bytes);
  if (::isatty(STDERR_FILENO)) thread_ = std::thread([this] { run(); });
}

ReadProgressBar::~ReadProgressBar() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (drawn_) std::fputs("\r\033[K", stderr);  // the terminal's line as it was
}

void ReadProgressBar::run() {
  const auto start = std::chrono::steady_clock::now();
  while (!stop_) {
    std::this_thread::sleep_for(kRedrawEvery);
    if (stop_ || std::chrono::steady_clock::now() - start < kQuietFor) continue;
    const ReadProgress& p = trace_read_progress();
    const double f = p.fraction();
    const int full = static_cast<int>(f * kBarWidth);
    std::string bar(static_cast<size_t>(full), '#');
    bar.append(static_cast<size_t>(kBarWidth - full), '.');
    std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %.2f/%.2f GB %s", what_.c_str(), bar.c_str(), f * 100, p.done() / 1e9,
                 p.total() / 1e9, file_name(p.file()).c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
}

}  // namespace ddp
