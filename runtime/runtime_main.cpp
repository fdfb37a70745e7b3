// ddp_profile_runtime: the LibTorch half of ddp_profile — the supervisor, the ranks and the --check ladders. Users
// type `ddp_profile` (main.cpp), which hands these modes to this binary beside it and runs the offline commands
// itself, without loading LibTorch. The offline commands still work here, for whoever calls this binary directly.
#include <iostream>
#include <string>
#include <vector>

#include "runtime/check/our_job.h"
#include "runtime/check/user_script.h"
#include "runtime/launch/cli/cli.h"
#include "runtime/launch/environment/launch_env.h"
#include "runtime/launch/supervisor/supervisor.h"
#include "runtime/launch/user_job/user_job.h"
#include "runtime/trace_commands/trace_commands.h"
#include "runtime/train/model_preflight.h"
#include "runtime/train/worker.h"

int main(int argc, char** argv) {
  // The user's own script: `--check|--record [options] -- LAUNCH...` (docs/python.md).
  if (ddp::is_user_job_command(argc, argv)) {
    ddp::UserJobCommand u;
    int code = 0;
    if (!ddp::parse_user_job_command(argc, argv, u, code)) return code;
    return u.check ? ddp::run_user_check(u) : ddp::run_user_record(u);
  }
  ddp::ParseResult p = ddp::parse_command_line(argc, argv);
  if (p.exit_code >= 0) {
    (p.exit_code == 0 ? std::cout : std::cerr) << p.message << std::endl;
    return p.exit_code;
  }
  const ddp::Command& cmd = p.cmd;
  // Workers get the user's job options; the mode flags are the supervisor's.
  std::vector<std::string> job_args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--record" || a == "--check" || a.rfind("--checks=", 0) == 0) continue;
    if (a == "--checks") {
      ++i;  // and its value
      continue;
    }
    job_args.push_back(a);
  }
  // A model that cannot run on the data fails here, once, before any rank (or rung of the ladder) starts.
  if ((cmd.mode == ddp::Mode::record || cmd.mode == ddp::Mode::check) && !ddp::launched_externally()) {
    std::string err;
    if (!ddp::preflight_model(cmd.job, err)) {
      std::cerr << "ddp_profile: " << err << std::endl;
      return 2;
    }
  }
  switch (cmd.mode) {
    case ddp::Mode::record:
      // Under an external launcher (torchrun --no-python, srun, mpirun) every process is a rank already.
      if (ddp::launched_externally()) return ddp::run_worker(cmd);
      return ddp::run_record(cmd, job_args);
    case ddp::Mode::worker:
      return ddp::run_worker(cmd);
    case ddp::Mode::check:
      return ddp::run_check(cmd, job_args);
    case ddp::Mode::export_trace:
      return ddp::run_export(cmd);
    case ddp::Mode::summary:
      return ddp::run_summary(cmd);
    case ddp::Mode::analyze:
      return ddp::run_analyze(cmd);
    case ddp::Mode::digest:
      return ddp::run_digest(cmd);
    case ddp::Mode::diff:
      return ddp::run_diff(cmd);
    case ddp::Mode::what_if:
      return ddp::run_what_if(cmd);
    case ddp::Mode::none:
      break;
  }
  std::cerr << "ddp_profile: no mode given (try --help)\n";
  return 2;
}
