// ddp_profile, the command users type. The trace commands (--export, --summary, --analyze, --diff, --what-if, --help)
// and a user's own script (--record and --check -- LAUNCH) run here, without LibTorch, so they start like trace tools
// (a few ms instead of the ~0.6 s the dynamic loader takes to bring LibTorch in) and need none. The modes that train
// our own job — its --record, --worker and --check — are handed, argv unchanged and unparsed, to ddp_profile_runtime
// beside this executable (runtime_main.cpp), which parses them: each command line is parsed once, by the binary that
// runs it.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/check/user_script.h"
#include "runtime/launch/cli/cli.h"
#include "runtime/launch/environment/launch_env.h"
#include "runtime/launch/user_job/user_job.h"
#include "runtime/trace_commands/trace_commands.h"

namespace {
// The runtime's file name, beside this executable (the build and an install put them together).
constexpr const char* kRuntimeExe = "ddp_profile_runtime";

[[noreturn]] void hand_to_runtime(char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string runtime = (ec ? std::filesystem::path(argv[0]).parent_path() : self.parent_path()) / kRuntimeExe;
  ::execv(runtime.c_str(), argv);
  std::cerr << "ddp_profile: our own job (--record/--check without --) runs in " << runtime
            << " (LibTorch), which cannot start: " << std::strerror(errno)
            << "; build it from source (README), or check your own script: ddp_profile --check -- torchrun ...\n";
  std::exit(1);
}

// Whether argv asks for a mode the runtime runs: --record or --check of our job, --worker. A user's script (`--`
// before its launch command) runs here. Only the mode flags are looked at; the runtime parses the rest.
bool runs_in_runtime(int argc, char** argv) {
  bool trains = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return false;  // --record/--check -- LAUNCH: a user's script, here
    trains |= a == "--record" || a == "--check" || a == "--worker";
  }
  return trains;
}
}  // namespace

int main(int argc, char** argv) {
  if (runs_in_runtime(argc, argv)) hand_to_runtime(argv);
  if (ddp::is_user_job_command(argc, argv)) {  // --record/--check -- LAUNCH...
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
  switch (cmd.mode) {
    case ddp::Mode::record:
    case ddp::Mode::worker:
    case ddp::Mode::check:
      hand_to_runtime(argv);  // not reached: runs_in_runtime sent them there unparsed
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
