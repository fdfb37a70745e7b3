#include "runtime/launch/environment/launch_env.h"

#include <cstdlib>

#include "traces/base/parse_int.h"

namespace ddp {
namespace {
// Each launcher's name for a process's rank: torchrun/env, srun, Open MPI, MPICH/Intel MPI (Hydra's PMI).
constexpr std::initializer_list<const char*> kRankVars = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};

const char* first_env(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return v;
  return nullptr;
}
// SLURM's tasks per node, "2(x3),1": node 0..2 run 2 tasks, node 3 runs 1. The count for node `node`, or -1.
int slurm_tasks_on_node(const char* list, int node) {
  const char* p = list;
  int index = 0;
  while (*p) {
    char* end = nullptr;
    long count = std::strtol(p, &end, 10);
    if (end == p || count <= 0) return -1;
    long repeat = 1;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x') return -1;
      repeat = std::strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || repeat <= 0) return -1;
      p = end + 1;
    }
    if (node < index + repeat) return static_cast<int>(count);
    index += static_cast<int>(repeat);
    if (*p == ',')
      ++p;
    else if (*p)
      return -1;
  }
  return -1;
}

// Under srun without MASTER_ADDR/MASTER_PORT: the job's first host and 15000 + the last 4 digits of the job id, as
// PyTorch Lightning derives them, so every task of the job agrees without being told.
bool slurm_rendezvous(LaunchEnv& env) {
  const char* nodes = first_env({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  const char* job = first_env({"SLURM_JOB_ID", "SLURM_JOBID"});
  int id = 0;
  if (!nodes || !job || !parse_int(job, id) || id < 0) return false;
  const std::string host = slurm_first_host(nodes);
  if (host.empty()) return false;
  env.master_addr = host;
  env.master_port = 15000 + id % 10000;
  env.rendezvous_from = "SLURM_JOB_NODELIST and SLURM_JOB_ID";
  return true;
}

}  // namespace

std::string slurm_first_host(const std::string& nodelist) {
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    // A bracket's first number, as written (zero padding kept): "[01-04,07]" -> "01".
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) return {};
    size_t j = i + 1;
    while (j < close && nodelist[j] >= '0' && nodelist[j] <= '9') host += nodelist[j++];
    if (j == i + 1) return {};
    i = close + 1;
  }
  return host;
}

bool launched_externally() { return first_env(kRankVars) != nullptr; }

bool read_launch_env(LaunchEnv& env, std::string& error) {
  const char* rank = first_env(kRankVars);
  const char* world = first_env({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  const char* local = first_env({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"});
  if (!rank || !world) {
    error =
        "--worker needs RANK and WORLD_SIZE (or SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE) in the "
        "environment";
    return false;
  }
  if (!parse_int(rank, env.rank) || !parse_int(world, env.world) || env.world < 1 || env.rank < 0 ||
      env.rank >= env.world) {
    error = std::string("inconsistent rank/world size in the environment: rank=") + rank + " world=" + world;
    return false;
  }
  if (local && !parse_int(local, env.local_rank)) env.local_rank = 0;
  if (const char* lw = first_env({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})) {
    int v = 0;
    if (parse_int(lw, v) && v > 0) env.local_world = v;
  } else if (const char* tasks = first_env({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    int node = 0;
    if (!parse_int(std::getenv("SLURM_NODEID"), node)) node = 0;
    env.local_world = slurm_tasks_on_node(tasks, node);
  } else if (const char* per_node = std::getenv("SLURM_NTASKS_PER_NODE")) {
    int v = 0;
    if (parse_int(per_node, v) && v > 0) env.local_world = v;
  }
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  env.rendezvous_from = "MASTER_ADDR/MASTER_PORT";
  if (!addr && !port && slurm_rendezvous(env)) {
    // srun sets no MASTER_ADDR/PORT: every task derives the same ones from the job.
  } else if (!addr || !port || !parse_int(port, env.master_port) || env.master_port <= 0 || env.master_port > 65535) {
    error = "MASTER_ADDR and MASTER_PORT must name the rendezvous host and port";
    if (std::getenv("SLURM_PROCID"))
      error +=
          " (under srun both may be left out: they are then the job's first host and 15000 + the job id's last "
          "4 digits)";
    return false;
  } else {
    env.master_addr = addr;
  }
  if (const char* l = std::getenv("DDP_PROFILE_LAUNCH"))
    env.method = l;
  else if (std::getenv("TORCHELASTIC_RUN_ID"))
    env.method = "torchrun";
  else if (std::getenv("SLURM_PROCID"))
    env.method = "srun";
  else if (std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK"))
    env.method = "mpirun";
  else
    env.method = "env";
  // PyTorch compares the text with str(True); so do we.
  if (const char* a = std::getenv("TORCHELASTIC_USE_AGENT_STORE")) env.agent_store = std::string(a) == "True";
  if (const char* c = std::getenv("TORCHELASTIC_RESTART_COUNT"); c && !parse_int(c, env.restart_count)) {
    error = std::string("TORCHELASTIC_RESTART_COUNT must be an integer, got '") + c + "'";
    return false;
  }
  if (const char* f = std::getenv("TORCHELASTIC_ERROR_FILE")) env.error_file = f;
  return true;
}
}  // namespace ddp
