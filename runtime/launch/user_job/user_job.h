#pragma once
// `ddp_profile --check -- LAUNCH...` and `ddp_profile --record -- LAUNCH...`: the closed loop and the recording on
// the user's own training script. The script carries the Python companion (python/ddp_profile, docs/python.md),
// switched on through the DDP_PROFILE_* variables named here; it writes our run-folder layout and the same C++
// judges as for our own job decide.
#include <string>
#include <vector>

namespace ddp {

// The companion's switches: the one list of the variables both sides read (python/ddp_profile/layout.py mirrors it,
// tests/runtime/test_companion_contract.cpp compares the two; docs/python.md lists them).
inline const char* kEnvRun = "DDP_PROFILE_RUN";                   // the run folder; unset: the companion does nothing
inline const char* kEnvMode = "DDP_PROFILE_MODE";                 // check | record
inline const char* kEnvVerifySteps = "DDP_PROFILE_VERIFY_STEPS";  // optimizer steps with tensor dumps
inline const char* kEnvFault = "DDP_PROFILE_FAULT";               // kind,rank,step
inline const char* kEnvHoldAfterSave = "DDP_PROFILE_HOLD_AFTER_SAVE";  // k: stop after the k-th dp.save
inline const char* kEnvSchedule = "DDP_PROFILE_SCHEDULE";              // record: wait,warmup,active
inline const char* kEnvFormat =
    "DDP_PROFILE_FORMAT";  // the heartbeat format we read (progress.h); the companion checks it

// Said when no rank of the job attached the companion (it wrote no meta): exit 2, a job that ran but cannot be checked.
inline const char* kNoCompanionMessage =
    "the job never trained a DistributedDataParallel model: ddp_profile finds the model when DDP(...) is built and "
    "attaches at its first forward in train mode, once an optimizer holds its parameters; a job that wraps its model "
    "another way can call `dp = ddp_profile.attach(model, optimizer, loss_fn=...)` itself (docs/python.md)";

struct UserJobCommand {
  bool check = false;               // --check (else --record)
  std::string out_dir;              // --out
  std::string resume_arg;           // --resume-arg 'TEMPLATE' with {ckpt}
  std::vector<std::string> checks;  // --checks
  std::vector<std::string> launch;  // everything after --
};

// True when argv is `--check|--record [options] -- LAUNCH...`.
bool is_user_job_command(int argc, const char* const* argv);
// Parses it; on a usage error prints it and returns false with exit_code 2 (0 for --help).
bool parse_user_job_command(int argc, const char* const* argv, UserJobCommand& out, int& exit_code);

// `--record -- LAUNCH...` (user_record.cpp); `--check -- LAUNCH...` is the ladder's (runtime/check/user_script.h).
int run_user_record(const UserJobCommand& cmd);

}  // namespace ddp
