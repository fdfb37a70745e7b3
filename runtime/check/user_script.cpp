// The ladder's subject that is the user's own script: each run is their launch command once, into its own folder
// under the run folder, with the companion switched on (runtime/launch/user_job/user_launch.h); the companion records,
// the ladder's judges decide.
#include "runtime/check/user_script.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "runtime/check/ladder.h"
#include "runtime/check/subject.h"
#include "runtime/check/user_numerics.h"
#include "runtime/common/run_folder_setup.h"
#include "runtime/launch/user_job/user_launch.h"
#include "runtime/launch/user_job/user_manifest.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
constexpr int kResumeFromSave = 1;         // checkpoint.resume kills the job right after this dp.save
constexpr double kFaultHangTimeoutS = 5;   // faults.exit: a hang is named within 10 s of the last progress
constexpr double kMainHangTimeoutS = 120;  // the other runs: a job that stops moving this long is hung

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A run of the ladder that failed before what the ladder waits for (a port taken, an import error, an OOM kill):
// that run, its error line and its log, never a verdict about the script.
std::string run_failure(const std::string& run, const UserLaunchResult& r, const std::string& dir) {
  const std::string why = !r.started ? r.error : r.last_error_line.empty() ? r.message : r.last_error_line;
  return "the ladder's " + run + " run failed: " + why + " (log: " + in_run(dir, kLaunchLogFile) + ")";
}

std::string failure_of(const UserLaunchResult& r) {
  return r.last_error_line.empty() ? r.message : r.message + " (" + r.last_error_line + ")";
}

// One run of the user's command: how it ended, and its ranks' metas, read once (the run's manifest is written from
// them). No metas and no error: no rank attached; an error names the meta and the field that broke the contract.
struct LaunchedRun {
  UserLaunchResult res;
  std::vector<records::companion_meta> metas;
  std::string meta_error;
};

// A dataset probe's items as the companion writes them (python/ddp_profile/dataset_probe.py): [[index, digest], ...].
bool are_probe_items(const nlohmann::json& items) {
  if (!items.is_array()) return false;
  for (const auto& it : items)
    if (!it.is_array() || it.size() != 2 || !it[0].is_number_integer() || !it[1].is_string()) return false;
  return true;
}

// The resume check failed on a log of its runs that does not read (`why` names the file, the line, the field).
ResumeEvidence failed_resume(ResumeEvidence& e, const std::string& why) {
  e.failed = why;
  return e;
}

// Rank 0's state at its first forward after each save (checkpoint.resume compares the two runs'); a run with no such
// log recorded none (the comparison then says so), one that does not read is `error`.
bool read_resume_points(const std::string& dir, std::vector<records::resume_points>& out, std::string& error) {
  const std::string path = in_run(dir, verify_log_file(0, kVerifyResumePoints));
  out.clear();
  return !fs::exists(path) || read_record_lines(path, out, error);
}

// Rank 0's save log of the run killed after its save, read whole once the run is over: false with `error` when it
// exists and does not read (while the run was going, a line still being written was asked again on the next poll).
bool saved_log_reads(const std::string& dir, std::string& error) {
  const std::string path = in_run(dir, verify_log_file(0, kVerifyCheckpoints));
  std::vector<records::checkpoints> lines;
  return !fs::exists(path) || read_record_lines(path, lines, error);
}

class UserScript final : public CheckSubject {
 public:
  explicit UserScript(const UserJobCommand& cmd) : cmd_(cmd) {}

  SubjectKind kind() const override { return kUserScript; }
  const char* what() const override { return "your script"; }
  bool own_runs_need_main_run() const override { return true; }  // the world size comes from the companion's meta
  int prepare(const std::string&) override { return kGoOn; }
  nlohmann::json describe() const override { return {{"launch", cmd_.launch}}; }

  int run_main(const std::string& dir, MainRun& main) override {
    LaunchedRun run = launch(dir, {{kEnvVerifySteps, std::to_string(kVerifySteps)}});
    const UserLaunchResult& res = run.res;
    if (!res.started) {
      std::cerr << "ddp_profile: " << res.error << "\n";
      return 2;
    }
    if (!run.meta_error.empty()) {
      std::cerr << "ddp_profile: the companion's meta breaks the run folder's contract: " << run.meta_error << "\n";
      return 1;
    }
    metas_ = std::move(run.metas);
    const std::string log = in_run(dir, kLaunchLogFile);
    // Our own verdict when we ended the job (a hang, a refused companion), else the job's last exception.
    const std::string why = res.killed_by_us || res.last_error_line.empty() ? res.message : res.last_error_line;
    if (metas_.empty()) {
      if (res.exit_code == 0) {
        std::cerr << "ddp_profile: " << kNoCompanionMessage << "\n";
        return 2;
      }
      std::cerr << "ddp_profile: the job failed before attach: " << why << " (" << log << ")\n";
      return 1;
    }
    main.world = static_cast<int>(metas_.front().world_size);
    // Before its first step: no rank's heartbeat got past step 0 (a rank killed by its launcher never rewrote its
    // meta, so the heartbeats say how far the job got).
    int64_t steps_done = 0;
    for (const auto& r : res.ranks) steps_done = std::max(steps_done, r.steps);
    if (res.exit_code != 0 && steps_done == 0) {
      std::cerr << "ddp_profile: the job failed before its first step: " << why << " (" << log << ")\n";
      return 1;
    }
    // Every rank's meta says what it trained (steps, sampler, dataset): a rank without one cannot be judged.
    if (static_cast<int>(metas_.size()) < main.world) {
      main.failure = "rank " + std::to_string(metas_.size()) + " of " + std::to_string(main.world) + " wrote no " +
                     in_run(dir, companion_meta_file(static_cast<int>(metas_.size()))) + ": " + failure_of(res);
      return kGoOn;
    }
    main.ok = res.exit_code == 0;
    main.failure = failure_of(res);
    return kGoOn;
  }

  ShardExpectation shard_expectation(const MainRun& main) override {
    const records::sampler_info& s = metas_.front().sampler;
    ShardExpectation e;
    e.distributed = s.is_distributed;
    e.sampler_class = s.class_name.value_or("");
    for (const auto& m : metas_) e.per_rank.push_back({m.sampler.seed, m.sampler.num_replicas, m.sampler.rank});
    if (!e.distributed) return e;
    // What the companion could not tell is absent from its meta: DistributedSampler's documented defaults stand in
    // (records.def says so, field by field).
    e.dataset_size = s.dataset_size.value_or(0);
    e.shuffle = s.shuffle.value_or(true);
    const bool drop_last = s.drop_last.value_or(false);
    const uint64_t seed = static_cast<uint64_t>(s.seed.value_or(0));
    const int64_t n = e.dataset_size;
    const bool shuffle = e.shuffle;
    const int world = main.world;
    e.expected = [=](int epoch, int rank) {
      return distributed_sampler_indices(n, world, rank, shuffle, seed, epoch, drop_last);
    };
    return e;
  }

  NumericsOutcome numerics(const MainRun& main, bool shard_ok) override {
    return user_numerics_evidence(main.dir, main.world, shard_ok, metas_.front(), kVerifySteps);
  }

  NoSyncEvidence no_sync(const MainRun& main) override {
    NoSyncEvidence e;
    e.per_rank.resize(main.world);
    for (int r = 0; r < main.world; ++r) {
      std::vector<records::micro_collectives> lines;
      if (!read_record_lines(in_run(main.dir, verify_log_file(r, kVerifyCollectives)), lines, e.failure)) return e;
      // Micro-steps no optimizer step followed (an epoch's tail shorter than the accumulation) are not a step.
      const int64_t steps = metas_[r].optimizer_steps;
      for (const auto& l : lines)
        if (l.step < steps) e.per_rank[r].push_back(micro_comm(l));
    }
    return e;
  }

  CheckpointEvidence checkpoints(const MainRun& main) override {
    CheckpointEvidence e;
    // The first save of the first rank that saved: what it holds against what the live run held then.
    for (int r = 0; r < main.world && e.files.empty(); ++r) {
      std::vector<records::checkpoints> saves;
      const std::string log = in_run(main.dir, verify_log_file(r, kVerifyCheckpoints));
      std::string err;
      if (!std::filesystem::exists(log)) continue;  // this rank saved nothing
      if (!read_record_lines(log, saves, e.failure)) return e;
      if (saves.empty()) continue;
      const records::checkpoints& s = saves.front();
      // A save into a buffer (Lightning writes its checkpoint through one) has no path: its copy in the run is named.
      const std::string path = s.path ? *s.path : in_run(main.dir, s.copy) + " (saved through a buffer)";
      e.files.push_back({path, s.expected, s.found, s.epoch_boundary, s.rng_untouched});
    }
    e.none =
        "the job saved no checkpoint: no torch.save of the model's weights, no accelerate save_state and no "
        "dp.save(state, path) after the model's first training forward";
    return e;
  }

  TrainingEvidence training(const MainRun& main) override {
    TrainingEvidence e = read_training(main.dir, main.world, TrainingFields::companion);
    const records::companion_meta& m = metas_.front();
    if (!m.params_outside_optimizer || !m.scheduler_steps_per_optimizer_step || !m.scheduler_rule) {
      e.failure = in_run(main.dir, companion_meta_file(0)) +
                  ": the check run's meta lacks what check mode records "
                  "(params_outside_optimizer, scheduler_steps_per_optimizer_step, scheduler_rule)";
      return e;
    }
    e.outside_optimizer = *m.params_outside_optimizer;
    e.scheduler_steps_per_step = std::max<int64_t>(*m.scheduler_steps_per_optimizer_step, 1);
    e.scheduler_rule = *m.scheduler_rule;
    e.warmup_steps = kVerifySteps + 1;  // rank 0 builds the reference beside the job in the verified steps
    return e;
  }

  DatasetEvidence datasets(const MainRun& main) override {
    DatasetEvidence e;
    for (int r = 0; r < main.world; ++r) {
      const std::optional<records::probe_info>& p = metas_[r].dataset_probe;
      if (p && p->items && !are_probe_items(*p->items)) {
        e.failure =
            in_run(main.dir, companion_meta_file(r)) + ": field 'dataset_probe.items': not [[index, digest], ...]";
        return e;
      }
      e.per_rank.push_back(p);
    }
    return e;
  }

  ResumeEvidence resume(const std::string& out, const MainRun& main) override;
  std::vector<FaultScenario> faults(const std::string& out, const MainRun& main) override;

 private:
  LaunchedRun launch(const std::string& dir, std::map<std::string, std::string> env,
                     const std::vector<std::string>& extra_args = {}, double hang_timeout_s = kMainHangTimeoutS,
                     std::function<bool()> kill_when = {}) {
    std::string err;
    LaunchedRun run;
    if (!prepare_run_folder(dir, run.res.error)) return run;
    UserLaunch l;
    l.argv = cmd_.launch;
    l.argv.insert(l.argv.end(), extra_args.begin(), extra_args.end());
    l.run_dir = dir;
    env[kEnvRun] = dir;
    env[kEnvMode] = "check";
    if (!env.count(kEnvVerifySteps)) env[kEnvVerifySteps] = "0";
    l.env = env;
    l.hang_timeout_s = hang_timeout_s;
    l.kill_when = std::move(kill_when);
    run.res = run_user_launch(l);
    if (!run.res.started || !read_user_metas(dir, run.metas, run.meta_error) || run.metas.empty()) return run;
    if (!write_manifest(dir, user_manifest(run.metas, l.argv), err)) run.meta_error = err;
    return run;
  }

  // Each rank's final state; a rank without one did not end cleanly (compare_final_states names it), a log that does
  // not read is `error`, naming the file, the line and the field.
  std::vector<std::map<std::string, std::string>> final_states(const std::string& dir, int world, std::string& error) {
    std::vector<std::map<std::string, std::string>> out(world);
    for (int r = 0; r < world; ++r) {
      const std::string path = in_run(dir, verify_log_file(r, kVerifyFinal));
      if (!fs::exists(path)) continue;
      std::vector<records::final_state> lines;
      if (!read_record_lines(path, lines, error)) return {};
      out[r] = final_state_of(lines);
    }
    return out;
  }

  const UserJobCommand& cmd_;
  std::vector<records::companion_meta> metas_;  // the main run's, per rank
};

ResumeEvidence UserScript::resume(const std::string& out, const MainRun& main) {
  ResumeEvidence e;
  if (cmd_.resume_arg.empty()) {
    e.skipped =
        "not run: say how your script resumes, e.g. --resume-arg '--resume {ckpt}' ({ckpt} is the path the script "
        "gave dp.save)";
    return e;
  }
  const std::string straight = in_run(out, kCheckResumeStraight), killed = in_run(out, kCheckResumeKilled),
                    resumed = in_run(out, kCheckResumeResumed);
  UserLaunchResult a = launch(straight, {}).res;
  if (!a.started || a.exit_code != 0) {
    e.failed = run_failure("straight", a, straight);
    return e;
  }
  // The killed run: rank 0 holds right after its save; we kill the whole job there, as a crash would.
  std::optional<records::checkpoints> save;
  auto saved = [&] {
    std::vector<records::checkpoints> lines;
    std::string err;  // not written yet, or a line still being written: asked again on the next poll
    if (!read_record_lines(in_run(killed, verify_log_file(0, kVerifyCheckpoints)), lines, err)) return false;
    for (const auto& l : lines)
      if (l.index == kResumeFromSave && fs::exists(in_run(killed, l.copy))) {
        save = l;
        return true;
      }
    return false;
  };
  UserLaunchResult k =
      launch(killed, {{kEnvHoldAfterSave, std::to_string(kResumeFromSave)}}, {}, kMainHangTimeoutS, saved).res;
  if (!save && !saved() && (!k.started || (k.exit_code != 0 && !k.killed_by_us))) {
    e.failed = run_failure("to-be-killed", k, killed);
    return e;
  }
  // A save log still being written was asked again on each poll; the run over, it must read whole.
  if (std::string err; !save && !saved_log_reads(killed, err)) {
    e.failed = err;
    return e;
  }
  if (!save && !saved()) {
    e.failed =
        "rank 0 saved no checkpoint, or only at the end (the run ended before it could be killed after "
        "its first save): nothing to resume from";
    return e;
  }
  const int64_t step = save->step;
  e.killed =
      "killed right after checkpoint " + std::to_string(kResumeFromSave) + " (step " + std::to_string(step) + ")";
  e.details = {{"killed_after_save", kResumeFromSave}, {"killed_at_step", step}};
  const std::string ckpt = fs::absolute(in_run(killed, save->copy)).string();
  std::string arg = cmd_.resume_arg;
  for (size_t p; (p = arg.find("{ckpt}")) != std::string::npos;) arg.replace(p, 6, ckpt);
  UserLaunchResult c = launch(resumed, {}, split_words(arg)).res;
  if (!c.started || c.exit_code != 0) {
    e.failed = "resuming with '" + arg + "': " + run_failure("resumed", c, resumed);
    return e;
  }
  // Every log the comparison reads must read: one that does not fails the check naming its file and field, never
  // an empty comparison.
  std::string err;
  const auto straight_states = final_states(straight, main.world, err);
  if (!err.empty()) return failed_resume(e, err);
  const auto resumed_states = final_states(resumed, main.world, err);
  if (!err.empty()) return failed_resume(e, err);
  const std::map<int64_t, std::string> hashes = read_replica_hashes(straight, 0, err);
  if (!err.empty()) return failed_resume(e, err);
  const std::vector<ConsumedBatch> a_samples = read_consumed(straight, 0, err);
  if (!err.empty()) return failed_resume(e, err);
  const std::vector<ConsumedBatch> c_samples = read_consumed(resumed, 0, err);
  if (!err.empty()) return failed_resume(e, err);
  std::vector<records::resume_points> a_points, c_points;
  if (!read_resume_points(straight, a_points, err) || !read_resume_points(resumed, c_points, err))
    return failed_resume(e, err);
  e.ranks = compare_final_states(straight_states, resumed_states);
  std::set<std::string> distinct;
  for (const auto& [s, h] : hashes) distinct.insert(h);
  e.params_never_changed = distinct.size() == 1;
  e.data_stream = resume_data_stream(a_samples, c_samples, step);
  if (!e.data_stream.empty()) e.details["data_stream"] = e.data_stream;
  e.first_state_difference = resume_point_difference(a_points, c_points, kResumeFromSave, e.resume_point_compared);
  if (!e.first_state_difference.empty()) e.details["first_state_difference_at_resume"] = e.first_state_difference;
  return e;
}

std::vector<FaultScenario> UserScript::faults(const std::string& out, const MainRun& main) {
  std::vector<FaultScenario> scenarios;
  const int rank = main.world > 1 ? 1 : 0;
  for (const std::string kind : {"kill", "throw", "hang"}) {
    FaultScenario s;
    s.kind = kind;
    s.rank = rank;
    const std::string dir = in_run(out, check_fault_run(kind));
    UserLaunchResult res = launch(dir, {{kEnvFault, kind + "," + std::to_string(rank) + "," + std::to_string(s.step)}},
                                  {}, kFaultHangTimeoutS)
                               .res;
    int64_t steps_done = 0;
    for (const auto& r : res.ranks) steps_done = std::max(steps_done, r.steps);
    if (!res.started || steps_done < s.step)
      s.run_failed =
          run_failure(kind + " fault", res, dir) + ", before the fault was injected at step " + std::to_string(s.step);
    s.outcome.exit_code = res.exit_code != 0 || res.hung ? 1 : 0;
    s.outcome.culprit = res.culprit;
    s.outcome.message = res.message;
    s.outcome.run_dir = dir;
    for (const auto& r : res.ranks) {
      RankOutcome o;
      o.rank = r.rank;
      o.pid = r.pid;
      o.exited = true;
      o.ended_after_fault_s = r.gone_after_s;
      o.description = r.state + " at " + r.where;
      s.outcome.ranks.push_back(o);
    }
    // What a user keeps of a failed run is what the companion wrote: every rank's logs must still read.
    s.traces_export = true;
    for (int r = 0; r < main.world && s.traces_export; ++r) {
      s.traces_export = !read_consumed(dir, r, s.export_error).empty();
      if (!s.traces_export && s.export_error.empty())
        s.export_error =
            "rank " + std::to_string(r) + " logged no batches (" + in_run(dir, verify_samples_file(r)) + ")";
    }
    scenarios.push_back(s);
  }
  return scenarios;
}
}  // namespace

int run_user_check(const UserJobCommand& cmd) {
  UserScript script(cmd);
  return run_ladder(script, cmd.checks, check_run_folder(cmd.out_dir));
}

}  // namespace ddp
