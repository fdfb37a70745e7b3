#pragma once
// How a rank ends when something goes wrong, apart from the loop it ends: the signal thread (SIGTERM/SIGINT flush
// the trace with ordinary code), `die` (the failure named with rank, host, step and stage, in the heartbeat and in
// torchrun's error file), and the faults a --check rehearsal injects.
#include <string>

#include "runtime/common/job_config.h"
#include "runtime/launch/heartbeat/progress.h"

namespace ddp {

// Who this rank is, for its exit messages: set once by run_worker from the launcher's environment.
struct RankExitIdentity {
  int rank = -1;
  int attempt = 0;         // TORCHELASTIC_RESTART_COUNT: injected faults fire on the first attempt only
  std::string error_file;  // TORCHELASTIC_ERROR_FILE: where torchrun reads a failed worker's message
};
RankExitIdentity& rank_exit_identity();
// The rank's heartbeat (progress/rank<R>.bin), which the exit path marks terminated or failed.
ProgressWriter& rank_progress();

void start_signal_thread();
// Rank 0 of a job without our supervisor (srun, mpirun, torchrun) writes the run's status itself when a signal ends
// it (scancel, a time limit): its run folder, once known. Under our supervisor, which writes it, never set.
void set_status_dir(const std::string& dir);
[[noreturn]] void die(const std::string& what);
// --inject-fault: kill, throw, exit0 or hang at `step` on the configured rank.
void maybe_inject_fault(const JobConfig& job, int rank, int64_t step);

}  // namespace ddp
