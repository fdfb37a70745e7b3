// `ddp_profile --record -- LAUNCH...`: the user's job once, under torch.profiler inside the companion (one Kineto
// trace per rank beside our manifest), then analysed as any PyTorch job's traces are.
#include <filesystem>
#include <iostream>

#include "runtime/common/run_folder_setup.h"
#include "runtime/launch/cli/cli.h"
#include "runtime/launch/user_job/user_job.h"
#include "runtime/launch/user_job/user_launch.h"
#include "runtime/launch/user_job/user_manifest.h"
#include "runtime/trace_commands/trace_commands.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

int run_user_record(const UserJobCommand& cmd) {
  const std::string out = record_run_folder(cmd.out_dir);
  std::string err;
  if (!prepare_run_folder(out, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  UserLaunch l;
  l.argv = cmd.launch;
  l.run_dir = out;
  l.env = {{kEnvRun, out}, {kEnvMode, "record"}};
  l.echo = true;
  l.hang_timeout_s = 0;  // the user's job, as they run it: ended only by itself or Ctrl-C
  l.time_limit_s = 24 * 3600;
  UserLaunchResult res = run_user_launch(l);
  if (!res.started) {
    std::cerr << "ddp_profile: " << res.error << "\n";
    return 2;
  }
  if (!write_user_manifest(out, cmd.launch, err)) {
    std::cerr << "ddp_profile: " << kNoCompanionMessage << "\n";
    return res.exit_code != 0 ? 1 : 2;
  }
  Command analyze;
  analyze.mode = Mode::analyze;
  std::error_code ec;
  for (int r = 0; r < static_cast<int>(kMaxWorldSize); ++r) {
    const std::string f = in_run(out, kineto_rank_trace_file(r));
    if (!fs::exists(f, ec)) break;
    analyze.inputs.push_back(f);
  }
  if (res.exit_code != 0)
    std::cerr << "ddp_profile: the job exited " << res.exit_code
              << (res.last_error_line.empty() ? "" : " (" + res.last_error_line + ")") << "\n";
  if (analyze.inputs.empty()) {
    std::cerr << "ddp_profile: no rank wrote a profiler trace (" << in_run(out, kineto_rank_trace_file(0))
              << "): did the job run past the profiler's schedule (" << kEnvSchedule << ")?\n";
    return 1;
  }
  analyze.input_dir = analyze.inputs.front();
  std::cout << "run: " << out << "\n\n";
  const int rc = run_analyze(analyze);
  return res.exit_code != 0 ? 1 : rc;
}

}  // namespace ddp
