// Parsing `ddp_profile --check|--record [--out DIR] [--resume-arg T] [--checks IDS] -- LAUNCH...`.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "runtime/launch/user_job/user_job.h"

namespace ddp {

namespace {
// What execvp would find: a path with a slash as it is, a bare name on PATH.
bool runnable(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    const std::string f = (end > at ? dirs.substr(at, end - at) : ".") + "/" + name;
    if (::access(f.c_str(), X_OK) == 0 && !std::filesystem::is_directory(f)) return true;
    at = end + 1;
  }
  return false;
}
}  // namespace

bool is_user_job_command(int argc, const char* const* argv) {
  bool mode = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return mode;
    mode |= std::strcmp(argv[i], "--check") == 0 || std::strcmp(argv[i], "--record") == 0;
  }
  return false;
}

bool parse_user_job_command(int argc, const char* const* argv, UserJobCommand& out, int& exit_code) {
  int split = 1;
  while (split < argc && std::strcmp(argv[split], "--") != 0) ++split;
  out.launch.assign(argv + split + 1, argv + argc);
  CLI::App app{"ddp_profile on your own training script (docs/python.md)", "ddp_profile"};
  bool check = false, record = false;
  app.add_flag("--check", check, "the closed-loop ladder on the job LAUNCH starts -> DIR/checks.json");
  app.add_flag("--record", record, "the job under torch.profiler, then analysed");
  app.add_option("--out", out.out_dir, "run folder to write (default: runs/<timestamp>)");
  app.add_option("--resume-arg", out.resume_arg,
                 "with --check: the arguments that make the script resume, {ckpt} = the checkpoint's path");
  app.add_option("--checks", out.checks, "with --check: run only these check ids (comma separated; docs/checks.md)")
      ->delimiter(',');
  std::vector<const char*> ours(argv, argv + split);
  try {
    app.parse(static_cast<int>(ours.size()), ours.data());
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return false;
  }
  auto usage = [&](const std::string& why) {
    std::cerr << "ddp_profile: " << why << "\n";
    exit_code = 2;
    return false;
  };
  if (check == record) return usage("give exactly one of --check and --record before -- LAUNCH...");
  out.check = check;
  if (out.launch.empty())
    return usage(
        "nothing after --: give the command that starts your job, e.g. -- torchrun "
        "--nproc-per-node 2 train.py");
  if (!runnable(out.launch.front()))
    return usage("cannot run " + out.launch.front() + ": not an executable file (nor one on PATH)");
  // A script the launcher would only fail to open is a usage error, found before anything starts.
  for (const auto& a : out.launch)
    if (a.size() > 3 && a[0] != '-' && a.compare(a.size() - 3, 3, ".py") == 0 && !std::filesystem::exists(a))
      return usage("the launch command names " + a + ", which does not exist");
  if (!check && (!out.resume_arg.empty() || !out.checks.empty()))
    return usage("--resume-arg and --checks go with --check");
  if (!out.resume_arg.empty() && out.resume_arg.find("{ckpt}") == std::string::npos)
    return usage("--resume-arg '" + out.resume_arg + "' does not name {ckpt}, the checkpoint to resume from");
  return true;
}

}  // namespace ddp
