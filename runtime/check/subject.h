#pragma once
// What the ladder needs of the job under check. Two subjects implement it: our own job (our_job.h: ranks this
// binary starts under its supervisor) and the user's launched script (user_script.h: their launch command with the
// Python companion recording). Each runs the main verification run, the resume runs and the fault runs its own way
// and hands over the evidence as plain data (evidence.h); the one ladder (ladder.h) and the one judge per check
// (judges.h) decide.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/check/evidence.h"
#include "traces/model/manifest.h"

namespace ddp {

// Which subjects a check applies to (check_table.h).
enum SubjectKind : unsigned { kOurJob = 1u, kUserScript = 2u, kEverySubject = kOurJob | kUserScript };

// The ladder's one verification run, which every main-run check is judged on.
struct MainRun {
  std::string dir;
  int world = 0;
  bool ok = false;      // it ended well: its evidence can be judged
  std::string failure;  // otherwise what happened (every main-run check fails with it)
  // Its manifest, read once by the ladder after the run for every check that reads it; absent: manifest_error says
  // why (missing, not JSON, a field against records.def).
  std::optional<Manifest> manifest;
  std::string manifest_error;
};

// Optimizer steps whose tensors every subject dumps and numerics.reference compares (the first ones: the verified
// steps also run with dropout off and the reference beside the job, memory.steady's warm-up counts them).
inline constexpr int64_t kVerifySteps = 3;

// Returned by prepare/run_main: go on with the ladder, or stop it with this exit code (a usage error is 2).
inline constexpr int kGoOn = -1;

class CheckSubject {
 public:
  virtual ~CheckSubject() = default;
  virtual SubjectKind kind() const = 0;
  virtual const char* what() const = 0;  // "our job", "your script": for messages
  // Before any run: the subject's inputs (a usage error stops the ladder with 2, nothing started).
  virtual int prepare(const std::string& out_dir) = 0;
  // Whether the checks that start runs of their own need the main run first (to learn the world size).
  virtual bool own_runs_need_main_run() const = 0;
  virtual int run_main(const std::string& dir, MainRun& out) = 0;

  // Evidence from the main run.
  virtual ShardExpectation shard_expectation(const MainRun& main) = 0;
  virtual NumericsOutcome numerics(const MainRun& main, bool samples_follow_rule) = 0;
  virtual NoSyncEvidence no_sync(const MainRun& main) = 0;
  virtual CheckpointEvidence checkpoints(const MainRun& main) = 0;
  virtual TrainingEvidence training(const MainRun& main) = 0;
  virtual DatasetEvidence datasets(const MainRun& main) = 0;
  // Evidence from runs of their own, each in a folder under out_dir (traces/model/run_folder.h names them).
  virtual ResumeEvidence resume(const std::string& out_dir, const MainRun& main) = 0;
  virtual std::vector<FaultScenario> faults(const std::string& out_dir, const MainRun& main) = 0;

  // Added to checks.json (the user's launch command).
  virtual nlohmann::json describe() const { return nlohmann::json::object(); }
};

}  // namespace ddp
