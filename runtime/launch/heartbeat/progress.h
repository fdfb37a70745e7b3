#pragma once
// A rank's heartbeat, shared with the supervisor through a small memory-mapped file (DIR/progress/rank<R>.bin):
// the compute thread stores its step and stage at every stage boundary (a few relaxed stores, no syscalls), and the
// supervisor reads them to tell a hung rank from its waiting peers and to name the step and stage of a failure.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "traces/model/stages.h"

namespace ddp {

enum class RankState : int32_t { starting = 0, running = 1, done = 2, failed = 3, terminated = 4 };

// The record is written by our ranks and by the Python companion (python/ddp_profile/layout.py mirrors every offset
// below; tests/runtime/test_companion_contract.cpp compares the two). A reader refuses a record of another format,
// naming both versions, rather than misreading it. Format 2 added the version itself (0 before).
inline constexpr uint32_t kProgressMagic = 0x50524F47;  // "PROG"
inline constexpr int32_t kProgressFormatVersion = 2;

struct ProgressRecord {
  uint32_t magic;
  int32_t rank;
  int32_t pid;
  std::atomic<int32_t> state;
  std::atomic<int64_t> step;
  std::atomic<int32_t> epoch;
  std::atomic<int32_t> stage;    // Stage, -1 before the first
  std::atomic<int64_t> last_ns;  // CLOCK_MONOTONIC of the last update
  // Carved out of the front of the former reason[480], so the record keeps its size and offsets.
  std::atomic<int32_t> bucket;          // the gradient bucket whose allreduce the rank waits for, -1 none
  int32_t format_version;               // kProgressFormatVersion of the writer
  std::atomic<int64_t> median_step_ns;  // median of the recent steps' durations, 0 before the first step
  char reason[464];
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "progress is shared between processes");
static_assert(sizeof(ProgressRecord) == 520, "the heartbeat's layout is shared with running ranks: keep its size");
static_assert(offsetof(ProgressRecord, magic) == 0 && offsetof(ProgressRecord, rank) == 4 &&
                  offsetof(ProgressRecord, pid) == 8 && offsetof(ProgressRecord, state) == 12 &&
                  offsetof(ProgressRecord, step) == 16 && offsetof(ProgressRecord, epoch) == 24 &&
                  offsetof(ProgressRecord, stage) == 28 && offsetof(ProgressRecord, last_ns) == 32 &&
                  offsetof(ProgressRecord, bucket) == 40 && offsetof(ProgressRecord, format_version) == 44 &&
                  offsetof(ProgressRecord, median_step_ns) == 48 && offsetof(ProgressRecord, reason) == 56,
              "the heartbeat's offsets are python/ddp_profile/layout.py's HEARTBEAT_FIELDS: change both");

std::string progress_file(const std::string& run_dir, int rank);

// The rank's side: creates and updates the record.
class ProgressWriter {
 public:
  ~ProgressWriter();
  bool open(const std::string& path, int rank, std::string& error);
  void stage(Stage s);
  void step(int64_t step, int epoch);
  void bucket(int b);          // from the comm thread: waiting for bucket b's allreduce (-1: none)
  void step_time(int64_t ns);  // a step's duration; keeps the median of the recent ones
  void set_state(RankState s);
  void fail(const std::string& reason);  // state = failed, reason kept (truncated to fit)
  ProgressRecord* record() { return rec_; }

 private:
  ProgressRecord* rec_ = nullptr;
  std::vector<int64_t> recent_;  // the last steps' durations (a ring)
  size_t next_ = 0;
};

// The supervisor's side: a read-only snapshot of a rank's record (all fields zero when missing).
struct ProgressSnapshot {
  bool present = false;
  int32_t format_version = 0;  // the writer's; a record of another format than ours holds only its pid here
  int32_t pid = 0;
  RankState state = RankState::starting;
  int64_t step = 0;
  int32_t epoch = 0;
  int32_t stage = -1;
  int64_t last_ns = 0;
  int32_t bucket = -1;
  int64_t median_step_ns = 0;
  std::string reason;
  std::string stage_name() const;
};
ProgressSnapshot read_progress(const std::string& path);

// How long a running rank may go without progress before the supervisor names it hung: the user's --hang-timeout
// when given (> 0), otherwise max(kHangFloorS, kHangStepFactor x the slowest rank's median step time), and before
// any rank completed a step at least kHangWarmupS (the first step pays for CUDA contexts, autotuning, a resume).
constexpr double kHangFloorS = 10;
constexpr double kHangStepFactor = 20;
constexpr double kHangWarmupS = 60;
double hang_timeout_s(double user_timeout_s, int64_t slowest_median_step_ns);

// A failure reason that is what a rank reports when a peer went away (a closed connection, a collective's timeout):
// the rank is then a victim, not the culprit.
bool looks_like_comm_error(const std::string& reason);

}  // namespace ddp
