#pragma once
#include "runtime/launch/cli/cli.h"

namespace ddp {
// One rank: rendezvous from the standard environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; or
// SLURM_* / OMPI_* / PMI_*), then the training loop, recorded. Returns the process exit code; on failure it reports,
// flushes its trace and exits without unwinding (a peer may be blocked in a collective with us).
int run_worker(const Command& cmd);
}  // namespace ddp
