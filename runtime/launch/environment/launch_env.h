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
  // Where master_addr/port came from: "MASTER_ADDR/MASTER_PORT", or under srun without them "SLURM_JOB_NODELIST
  // and SLURM_JOB_ID" (the first host of the job, port 15000 + the job id's last 4 digits, as Lightning does).
  std::string rendezvous_from;
  // torchrun's contract (torch >= 2): its agent serves the rendezvous store on MASTER_PORT, the worker group's
  // restart count, and the file its error handler reads a failed worker's message from.
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT
  std::string error_file;    // TORCHELASTIC_ERROR_FILE
  bool present() const { return rank >= 0 && world > 0; }
};
// True when a launcher (torchrun, srun, mpirun, MPICH/Intel MPI) started this process as one rank of a job.
bool launched_externally();
// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01", "rack[1-2]-n[3-4]" -> "rack1-n3". Empty
// when the list cannot be read.
std::string slurm_first_host(const std::string& nodelist);
// Reads the launcher's environment. Returns false with `error` set when it is incomplete or inconsistent.
bool read_launch_env(LaunchEnv& env, std::string& error);
}  // namespace ddp
