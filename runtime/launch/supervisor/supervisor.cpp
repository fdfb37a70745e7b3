#include "runtime/launch/supervisor/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "profiler/clock.h"
#include "runtime/common/json_file.h"
#include "runtime/common/run_folder_setup.h"
#include "runtime/data/dataset_cache.h"
#include "runtime/launch/cli/job_inputs.h"
#include "runtime/launch/environment/cpu_sets.h"
#include "runtime/launch/environment/loopback_port.h"
#include "runtime/launch/supervisor/rank_watch.h"
#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"

namespace ddp {
namespace {

pid_t spawn_worker(int rank, int world, int port, const std::string& run_dir, const std::vector<std::string>& args,
                   bool quiet, const std::vector<int>& cpus) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: its own process group (so the supervisor can end it and anything it started), and it dies with us.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("DDP_PROFILE_LAUNCH", "supervisor", 1);
  // One BLAS/OpenMP thread per rank: two ranks share the cores; oversubscription would distort every span.
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
  if (!cpus.empty() && !pin_process(cpus))
    std::fprintf(stderr, "ddp_profile: rank %d: cannot pin to its cores\n", rank);
  if (rank != 0 || quiet) {
    std::string log = in_run(run_dir, rank_log_file(rank));
    int fd = ::open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      if (quiet) ::dup2(fd, 2);
    }
  }
  std::vector<std::string> argv_s = {"ddp_profile"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "ddp_profile: cannot re-execute itself as rank %d: %s\n", rank, std::strerror(errno));
  ::_exit(127);
}

// DIR/run_status.json: the run's verdict. A run whose verdict cannot be written has failed to say what happened: the
// exit code says so too.
void write_run_status(const std::string& dir, RunOutcome& out) {
  nlohmann::json st = {{"exit_code", out.exit_code}, {"culprit", out.culprit}, {"message", out.message}};
  for (const auto& o : out.ranks)
    st["ranks"].push_back(
        {{"rank", o.rank}, {"pid", o.pid}, {"exit", o.description}, {"ended_after_fault_s", o.ended_after_fault_s}});
  std::string err;
  if (!write_json_atomic(in_run(dir, kRunStatusFile), st, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    if (out.exit_code == 0) out.exit_code = 1;
    out.message += (out.message.empty() ? "" : "; ") + err;
  }
}

// Starts every rank (each pinned to its share of the cores unless --no-pin); on a failure ends the ones started and
// says which could not start.
bool spawn_ranks(const JobConfig& job, int port, const std::string& dir, const std::vector<std::string>& args,
                 bool quiet, std::vector<RankOutcome>& ranks, std::vector<pid_t>& pids, std::string& error) {
  const int world = job.nproc;
  const std::vector<std::vector<int>> cpu_sets =
      job.pin_cpus ? rank_cpu_sets(allowed_cpus(), world) : std::vector<std::vector<int>>{};
  for (int r = 0; r < world; ++r) {
    ranks[r].rank = r;
    pids[r] = spawn_worker(r, world, port, dir, args, quiet, cpu_sets.empty() ? std::vector<int>{} : cpu_sets[r]);
    ranks[r].pid = pids[r];
    if (pids[r] < 0) {
      error = "cannot start rank " + std::to_string(r) + ": " + std::strerror(errno);
      for (int k = 0; k < r; ++k) ::kill(-pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) ::waitpid(pids[k], nullptr, 0);
      return false;
    }
  }
  return true;
}

// Ctrl-C / SIGTERM to the supervisor: the ranks are ended like after a failure (SIGTERM, so they flush their
// traces), the traces are exported, and the run exits 130.
volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int sig) { g_interrupted = sig; }

}  // namespace

RunOutcome supervise_run(const Command& cmd, const std::vector<std::string>& worker_args, bool quiet) {
  RunOutcome out;
  const JobConfig& job = cmd.job;
  const std::string dir = cmd.out_dir;
  out.run_dir = dir;
  const int port = free_loopback_port();
  if (port <= 0) {
    out.exit_code = 1;
    out.message = "cannot find a free TCP port on 127.0.0.1 for the rendezvous";
    return out;
  }
  std::vector<std::string> args = worker_args;
  args.insert(args.end(), {"--worker", "--out", dir, "--data", job.data_path});

  std::vector<RankOutcome> ranks(job.nproc);
  std::vector<pid_t> pids(job.nproc);
  if (!spawn_ranks(job, port, dir, args, quiet, ranks, pids, out.message)) {
    out.exit_code = 1;
    return out;
  }
  RankWatch watch(dir, job.hang_timeout_s, std::move(ranks), std::move(pids));
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  g_interrupted = 0;
  while (true) {
    watch.poll(g_interrupted != 0);
    if (!watch.any_alive()) break;
    std::this_thread::sleep_for(RankWatch::kPollInterval);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  out = watch.finish();
  out.run_dir = dir;
  write_run_status(dir, out);
  return out;
}

int run_record(const Command& cmd_in, const std::vector<std::string>& args) {
  Command cmd = cmd_in;
  cmd.out_dir = record_run_folder(cmd.out_dir);
  std::string error;
  if (!prepare_run_folder(cmd.out_dir, error)) {
    std::cerr << "ddp_profile: " << error << "\n";
    return 1;
  }
  if (!validate_job_inputs(cmd.job, error)) {
    std::cerr << "ddp_profile: " << error << "\n";
    return 2;  // the user's input, refused before any rank starts
  }
  const DatasetPath where = dataset_path_source(cmd.job);
  if (cmd.job.data_path.empty()) cmd.job.data_path = default_data_path(cmd.out_dir, cmd.job);
  cmd.job.data_path = absolute_path(cmd.job.data_path);
  if (!ensure_dataset(cmd.job, where, error, true)) {
    std::cerr << "ddp_profile: " << error << "\n";
    return 2;  // the user's input, refused before any rank starts
  }
  std::cout << "recording " << cmd.job.nproc << " ranks into " << cmd.out_dir << std::endl;
  RunOutcome r = supervise_run(cmd, args, false);
  if (r.exit_code == 2) return 2;  // the ranks said why
  if (r.exit_code != 0) std::cerr << "ddp_profile: " << r.message << "\n";
  if (cmd.job.record) {
    RunTrace run;
    ExportStats stats;
    std::string err;
    std::string path = cmd.out_dir + "/" + kChromeTraceFile;
    if (load_run(cmd.out_dir, run, err) && export_chrome(run, path, stats, err)) {
      std::cout << "trace: " << path << " (" << stats.events << " events";
      if (!run.problems.empty()) std::cout << "; " << run.problems.size() << " problem(s): " << run.problems.front();
      std::cout << ")\n";
    } else {
      std::cerr << "ddp_profile: export failed: " << err << "\n";
      if (r.exit_code == 0) r.exit_code = 1;
    }
  }
  std::cout << "run folder: " << cmd.out_dir << (r.exit_code == 0 ? "" : " (run failed)") << std::endl;
  return r.exit_code;
}

}  // namespace ddp
