#pragma once
#include <string>

namespace ddp {
// Where this rank's identity came from: our supervisor, torchrun, srun, mpirun or a plain environment.
struct LaunchEnv {
  int rank = -1;
  int world = -1;
  int local_rank = 0;
  int local_world = -1;  // ranks on this host; -1 when the launcher does not say
  std::string master_addr;
  int master_port = 0;
  std::string method;  // supervisor | torchrun | srun | mpirun | env
  // torchrun's contract (torch >= 2): its agent serves the rendezvous store on MASTER_PORT, the worker group's
  // restart count, and the file its error handler reads a failed worker's message from.
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT
  std::string error_file;    // TORCHELASTIC_ERROR_FILE
  bool present() const { return rank >= 0 && world > 0; }
};
// True when a launcher (torchrun, srun, mpirun, MPICH/Intel MPI) started this process as one rank of a job.
bool launched_externally();
// Reads the launcher's environment. Returns false with `error` set when it is incomplete or inconsistent.
bool read_launch_env(LaunchEnv& env, std::string& error);
}  // namespace ddp
