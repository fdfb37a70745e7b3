#include "runtime/launch/heartbeat/progress.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "profiler/clock.h"
#include "traces/base/stats.h"
#include "traces/model/run_folder.h"

namespace ddp {
std::string progress_file(const std::string& run_dir, int rank) { return in_run(run_dir, rank_progress_file(rank)); }

ProgressWriter::~ProgressWriter() {
  if (rec_) ::munmap(rec_, sizeof(ProgressRecord));
}

bool ProgressWriter::open(const std::string& path, int rank, std::string& error) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0 || ::ftruncate(fd, sizeof(ProgressRecord)) != 0) {
    error = "cannot create " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  void* p = ::mmap(nullptr, sizeof(ProgressRecord), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    error = "cannot map " + path + ": " + std::strerror(errno);
    return false;
  }
  rec_ = static_cast<ProgressRecord*>(p);
  rec_->rank = rank;
  rec_->pid = ::getpid();
  rec_->step.store(0);
  rec_->epoch.store(0);
  rec_->stage.store(-1);
  rec_->last_ns.store(prof::monotonic_ns());
  rec_->bucket.store(-1);
  rec_->median_step_ns.store(0);
  rec_->state.store(static_cast<int32_t>(RankState::starting));
  rec_->format_version = kProgressFormatVersion;
  rec_->magic = kProgressMagic;
  return true;
}

void ProgressWriter::stage(Stage s) {
  if (!rec_) return;
  rec_->stage.store(static_cast<int32_t>(s), std::memory_order_relaxed);
  rec_->last_ns.store(prof::monotonic_ns(), std::memory_order_relaxed);
}

void ProgressWriter::step(int64_t step, int epoch) {
  if (!rec_) return;
  rec_->step.store(step, std::memory_order_relaxed);
  rec_->epoch.store(epoch, std::memory_order_relaxed);
  rec_->stage.store(static_cast<int32_t>(Stage::step), std::memory_order_relaxed);
  rec_->last_ns.store(prof::monotonic_ns(), std::memory_order_relaxed);
}

void ProgressWriter::bucket(int b) {
  if (rec_) rec_->bucket.store(b, std::memory_order_relaxed);
}

void ProgressWriter::step_time(int64_t ns) {
  if (!rec_) return;
  constexpr size_t kRecent = 64;
  if (recent_.size() < kRecent)
    recent_.push_back(ns);
  else
    recent_[next_++ % kRecent] = ns;
  rec_->median_step_ns.store(static_cast<int64_t>(median(std::vector<double>(recent_.begin(), recent_.end()))),
                             std::memory_order_relaxed);
}

void ProgressWriter::set_state(RankState s) {
  if (!rec_) return;
  rec_->state.store(static_cast<int32_t>(s));
  rec_->last_ns.store(prof::monotonic_ns());
}

void ProgressWriter::fail(const std::string& reason) {
  if (!rec_) return;
  size_t n = std::min(reason.size(), sizeof(rec_->reason) - 1);
  std::memcpy(rec_->reason, reason.data(), n);
  rec_->reason[n] = 0;
  set_state(RankState::failed);
}

std::string ProgressSnapshot::stage_name() const {
  if (stage < 0 || stage >= kStageCount) return "startup";
  return std::string(ddp::stage_name(static_cast<Stage>(stage)));
}

ProgressSnapshot read_progress(const std::string& path) {
  ProgressSnapshot s;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  ProgressRecord r;
  ssize_t n = ::pread(fd, &r, sizeof(r), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(r)) || r.magic != kProgressMagic) return s;
  s.present = true;
  s.format_version = r.format_version;
  s.pid = r.pid;  // the record's head (magic, rank, pid) is the same in every format: the process can still be ended
  if (s.format_version != kProgressFormatVersion) return s;  // the rest is not ours to read: the watcher says so
  s.state = static_cast<RankState>(r.state.load());
  s.step = r.step.load();
  s.epoch = r.epoch.load();
  s.stage = r.stage.load();
  s.last_ns = r.last_ns.load();
  s.bucket = r.bucket.load();
  s.median_step_ns = r.median_step_ns.load();
  r.reason[sizeof(r.reason) - 1] = 0;
  s.reason = r.reason;
  return s;
}

double hang_timeout_s(double user_timeout_s, int64_t slowest_median_step_ns) {
  if (user_timeout_s > 0) return user_timeout_s;
  if (slowest_median_step_ns <= 0) return kHangWarmupS;
  return std::max(kHangFloorS, kHangStepFactor * static_cast<double>(slowest_median_step_ns) / 1e9);
}

bool looks_like_comm_error(const std::string& reason) {
  for (const char* k : {"Connection", "connection", "Gloo", "gloo", "peer", "Broken pipe", "NCCL", "Timed out",
                        "timed out", "closed", "Socket", "socket"})
    if (reason.find(k) != std::string::npos) return true;
  return false;
}

}  // namespace ddp
