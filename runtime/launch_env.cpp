#include "runtime/launch_env.h"

#include <cstdlib>

namespace ddp {
namespace {
const char* first_env(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return v;
  return nullptr;
}
bool to_int(const char* s, int& v) {
  if (!s || !*s) return false;
  char* end = nullptr;
  long x = std::strtol(s, &end, 10);
  if (*end) return false;
  v = static_cast<int>(x);
  return true;
}
}  // namespace

bool read_launch_env(LaunchEnv& env, std::string& error) {
  const char* rank = first_env({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
  const char* world = first_env({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  const char* local = first_env({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"});
  if (!rank || !world) {
    error = "--worker needs RANK and WORLD_SIZE (or SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE) in the environment";
    return false;
  }
  if (!to_int(rank, env.rank) || !to_int(world, env.world) || env.world < 1 || env.rank < 0 || env.rank >= env.world) {
    error = std::string("inconsistent rank/world size in the environment: rank=") + rank + " world=" + world;
    return false;
  }
  if (local && !to_int(local, env.local_rank)) env.local_rank = 0;
  // SLURM writes tasks per node as "2" or "2(x3)": the count comes first.
  if (const char* lw = first_env({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                  "SLURM_NTASKS_PER_NODE"})) {
    char* end = nullptr;
    long v = std::strtol(lw, &end, 10);
    if (end != lw && v > 0) env.local_world = static_cast<int>(v);
  }
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (!addr || !port || !to_int(port, env.master_port) || env.master_port <= 0 || env.master_port > 65535) {
    error = "MASTER_ADDR and MASTER_PORT must name the rendezvous host and port";
    return false;
  }
  env.master_addr = addr;
  if (const char* l = std::getenv("DDP_PROFILE_LAUNCH")) env.method = l;
  else if (std::getenv("TORCHELASTIC_RUN_ID")) env.method = "torchrun";
  else if (std::getenv("SLURM_PROCID")) env.method = "srun";
  else if (std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK")) env.method = "mpirun";
  else env.method = "env";
  return true;
}
}  // namespace ddp
