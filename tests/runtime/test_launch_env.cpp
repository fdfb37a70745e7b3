// The launcher's environment: torchrun, srun and mpirun spell rank, world and ranks-per-host differently.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "runtime/launch/environment/launch_env.h"

namespace {

// Sets exactly these launcher variables for one test and restores the previous environment afterwards.
class Env {
 public:
  explicit Env(const std::map<std::string, std::string>& vars) {
    for (const char* n : kAll) {
      if (const char* v = std::getenv(n)) saved_[n] = v;
      ::unsetenv(n);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const char* n : kAll) ::unsetenv(n);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  static constexpr const char* kAll[] = {"RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "TORCHELASTIC_RUN_ID",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "SLURM_LOCALID",
                                         "SLURM_NTASKS_PER_NODE",
                                         "SLURM_TASKS_PER_NODE",
                                         "SLURM_STEP_TASKS_PER_NODE",
                                         "SLURM_NODEID",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "OMPI_COMM_WORLD_LOCAL_SIZE",
                                         "PMI_RANK",
                                         "PMI_SIZE",
                                         "MPI_LOCALRANKID",
                                         "MPI_LOCALNRANKS",
                                         "DDP_PROFILE_LAUNCH",
                                         "SLURM_JOB_NODELIST",
                                         "SLURM_STEP_NODELIST",
                                         "SLURM_NODELIST",
                                         "SLURM_JOB_ID",
                                         "SLURM_JOBID"};
  std::map<std::string, std::string> saved_;
};

TEST(LaunchEnv, TorchrunGivesRanksPerHost) {
  Env e({{"RANK", "3"},
         {"WORLD_SIZE", "4"},
         {"LOCAL_RANK", "1"},
         {"LOCAL_WORLD_SIZE", "2"},
         {"MASTER_ADDR", "h0"},
         {"MASTER_PORT", "29500"},
         {"TORCHELASTIC_RUN_ID", "x"}});
  ddp::LaunchEnv env;
  std::string err;
  ASSERT_TRUE(ddp::read_launch_env(env, err)) << err;
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world, 2);
  EXPECT_EQ(env.method, "torchrun");
}

TEST(LaunchEnv, SlurmTasksPerNodeIsReadForThisNode) {
  auto local_world = [](std::map<std::string, std::string> vars) {
    vars.insert({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "7"}, {"MASTER_ADDR", "h0"}, {"MASTER_PORT", "29500"}});
    Env e(vars);
    ddp::LaunchEnv env;
    std::string err;
    EXPECT_TRUE(ddp::read_launch_env(env, err)) << err;
    EXPECT_EQ(env.method, "srun");
    return env.local_world;
  };
  // srun -N2 -n2: one task on each host, so no GPU is shared
  EXPECT_EQ(local_world({{"SLURM_TASKS_PER_NODE", "1(x2)"}}), 1);
  // uneven: nodes 0-2 run two tasks, node 3 runs one
  EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "1"}}), 2);
  EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}}), 1);
  EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "4"}}), -1);
  // the step's own list wins over the allocation's
  EXPECT_EQ(local_world({{"SLURM_STEP_TASKS_PER_NODE", "4"}, {"SLURM_TASKS_PER_NODE", "8"}}), 4);
  EXPECT_EQ(local_world({{"SLURM_NTASKS_PER_NODE", "3"}}), 3);
  EXPECT_EQ(local_world({{"SLURM_TASKS_PER_NODE", "2(y3)"}}), -1) << "malformed: unknown, not a guess";
}

TEST(LaunchEnv, MpirunLocalSizeAndUnknownOtherwise) {
  {
    Env e({{"OMPI_COMM_WORLD_RANK", "0"},
           {"OMPI_COMM_WORLD_SIZE", "2"},
           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
           {"MASTER_ADDR", "h0"},
           {"MASTER_PORT", "29500"}});
    ddp::LaunchEnv env;
    std::string err;
    ASSERT_TRUE(ddp::read_launch_env(env, err)) << err;
    EXPECT_EQ(env.local_world, 2);
    EXPECT_EQ(env.method, "mpirun");
  }
  Env e({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h0"}, {"MASTER_PORT", "29500"}});
  ddp::LaunchEnv env;
  std::string err;
  ASSERT_TRUE(ddp::read_launch_env(env, err)) << err;
  EXPECT_EQ(env.local_world, -1);
  EXPECT_EQ(env.method, "env");
}

TEST(LaunchEnv, IncompleteOrInconsistentIsAnError) {
  {
    Env e(std::map<std::string, std::string>{{"RANK", "0"}});
    ddp::LaunchEnv env;
    std::string err;
    EXPECT_FALSE(ddp::read_launch_env(env, err));
    EXPECT_NE(err.find("RANK and WORLD_SIZE"), std::string::npos);
  }
  Env e({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h0"}, {"MASTER_PORT", "29500"}});
  ddp::LaunchEnv env;
  std::string err;
  EXPECT_FALSE(ddp::read_launch_env(env, err));
  EXPECT_NE(err.find("inconsistent"), std::string::npos);
}

}  // namespace

namespace {
// --record under a launcher must run as a rank, not start a supervisor of its own: every rank variable the reader
// accepts (MPICH/Intel MPI set only PMI_RANK) counts.
TEST(LaunchEnv, EveryLaunchersRankVariableMeansLaunchedExternally) {
  {
    Env e(std::map<std::string, std::string>{});
    EXPECT_FALSE(ddp::launched_externally());
  }
  for (const char* var : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    Env e(std::map<std::string, std::string>{{var, "0"}});
    EXPECT_TRUE(ddp::launched_externally()) << var;
  }
}
}  // namespace

namespace {
// srun sets no MASTER_ADDR/MASTER_PORT: the job's first host and 15000 + the job id's last 4 digits (Lightning's
// rule), the same on every task; MASTER_ADDR/PORT given still win, and half of them given is an error.
TEST(LaunchEnv, SrunWithoutMasterAddrDerivesItFromTheJob) {
  {
    Env e({{"SLURM_PROCID", "1"},
           {"SLURM_NTASKS", "2"},
           {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu1"},
           {"SLURM_JOB_ID", "4123456"}});
    ddp::LaunchEnv env;
    std::string err;
    ASSERT_TRUE(ddp::read_launch_env(env, err)) << err;
    EXPECT_EQ(env.master_addr, "gpu07");
    EXPECT_EQ(env.master_port, 15000 + 3456);
    EXPECT_EQ(env.rendezvous_from, "SLURM_JOB_NODELIST and SLURM_JOB_ID");
    EXPECT_EQ(env.method, "srun");
  }
  {
    Env e({{"SLURM_PROCID", "0"},
           {"SLURM_NTASKS", "2"},
           {"SLURM_JOB_NODELIST", "vm"},
           {"SLURM_JOB_ID", "7"},
           {"MASTER_ADDR", "h0"},
           {"MASTER_PORT", "29500"}});
    ddp::LaunchEnv env;
    std::string err;
    ASSERT_TRUE(ddp::read_launch_env(env, err)) << err;
    EXPECT_EQ(env.master_addr, "h0");
    EXPECT_EQ(env.master_port, 29500);
    EXPECT_EQ(env.rendezvous_from, "MASTER_ADDR/MASTER_PORT");
  }
  {
    Env e({{"SLURM_PROCID", "0"},
           {"SLURM_NTASKS", "2"},
           {"SLURM_JOB_NODELIST", "vm"},
           {"SLURM_JOB_ID", "7"},
           {"MASTER_ADDR", "h0"}});
    ddp::LaunchEnv env;
    std::string err;
    EXPECT_FALSE(ddp::read_launch_env(env, err));
    EXPECT_NE(err.find("under srun both may be left out"), std::string::npos) << err;
  }
}

TEST(LaunchEnv, SlurmNodeListsFirstHost) {
  EXPECT_EQ(ddp::slurm_first_host("vm"), "vm");
  EXPECT_EQ(ddp::slurm_first_host("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(ddp::slurm_first_host("rack[1-2]-n[3-4]"), "rack1-n3");
  EXPECT_EQ(ddp::slurm_first_host("a,b"), "a");
  EXPECT_EQ(ddp::slurm_first_host("node[01-04"), "");
  EXPECT_EQ(ddp::slurm_first_host("node[x]"), "");
}
}  // namespace
