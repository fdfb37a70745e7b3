// `ddp_profile --check -- LAUNCH...`: the closed-loop ladder on the user's own script. The script runs as often as
// the ladder needs (a verification run, a straight / killed / resumed run for checkpoint.resume, one run per injected
// fault), each into its own folder under the run folder; the companion records, the judges of runtime/verify and
// user_judges decide.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/common/check_ids.h"
#include "runtime/common/json_file.h"
#include "runtime/launch/run_folder_setup.h"
#include "runtime/user/user_job.h"
#include "runtime/user/user_judges.h"
#include "runtime/user/user_launch.h"
#include "runtime/user/user_manifest.h"
#include "runtime/user/user_numerics.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kVerifySteps = 3;
constexpr int kResumeFromSave = 1;         // checkpoint.resume kills the job right after this dp.save
constexpr double kFaultHangTimeoutS = 5;   // faults.exit: a hang is named within 10 s of the last progress
constexpr double kMainHangTimeoutS = 120;  // the other runs: a job that stops moving this long is hung

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct Ladder {
  const UserJobCommand& cmd;
  std::string out;

  UserLaunchResult launch(const std::string& dir, std::map<std::string, std::string> env,
                          const std::vector<std::string>& extra_args = {}, double hang_timeout_s = kMainHangTimeoutS,
                          std::function<bool()> kill_when = {}) {
    std::string err;
    UserLaunchResult res;
    if (!prepare_run_folder(dir, err)) {
      res.error = err;
      return res;
    }
    UserLaunch l;
    l.argv = cmd.launch;
    l.argv.insert(l.argv.end(), extra_args.begin(), extra_args.end());
    l.run_dir = dir;
    env[kEnvRun] = dir;
    env[kEnvMode] = "check";
    if (!env.count(kEnvVerifySteps)) env[kEnvVerifySteps] = "0";
    l.env = env;
    l.hang_timeout_s = hang_timeout_s;
    l.kill_when = std::move(kill_when);
    res = run_user_launch(l);
    std::string merr;
    if (res.started) write_user_manifest(dir, l.argv, merr);  // a run with no attach has none; said by the caller
    return res;
  }
};

std::vector<std::vector<ConsumedBatch>> consumed_of(const std::string& dir, int world, std::string& err) {
  std::vector<std::vector<ConsumedBatch>> per_rank(world);
  for (int r = 0; r < world; ++r) per_rank[r] = read_consumed(dir, r, err);
  return per_rank;
}

CheckResult shard_rule(const std::string& dir, int world, const nlohmann::json& meta0) {
  std::string err;
  auto per_rank = consumed_of(dir, world, err);
  for (const auto& r : per_rank)
    if (r.empty())
      return check_result("data.shard_rule", CheckStatus::fail, err.empty() ? "a rank logged no batches" : err);
  const nlohmann::json s = meta0.value("sampler", nlohmann::json::object());
  if (!s.value("is_distributed", false)) return judge_no_distributed_sampler(per_rank, s.value("class", std::string()));
  const int64_t n = s.value("dataset_size", int64_t{0});
  const bool shuffle = s.value("shuffle", true), drop_last = s.value("drop_last", false);
  const uint64_t seed = s.value("seed", uint64_t{0});
  auto expected = [&](int epoch, int rank) {
    return distributed_sampler_indices(n, world, rank, shuffle, seed, epoch, drop_last);
  };
  return check_shard_rule(per_rank, n, shuffle, expected);
}

CheckResult no_sync(const std::string& dir, const std::vector<nlohmann::json>& metas) {
  const int world = static_cast<int>(metas.size());
  std::vector<std::vector<MicroComm>> per_rank(world);
  for (int r = 0; r < world; ++r) {
    std::vector<nlohmann::json> lines;
    std::string err;
    if (!read_json_lines(in_run(dir, user_collectives_file(r)), lines, err))
      return check_result("comm.no_sync", CheckStatus::fail, err);
    // Micro-steps no optimizer step followed (an epoch's tail shorter than the accumulation) are not a step.
    const int64_t steps = metas[r].value("optimizer_steps", int64_t{0});
    for (const MicroComm& m : parse_micro_comm(lines))
      if (m.step < steps) per_rank[r].push_back(m);
  }
  return judge_user_no_sync(per_rank);
}

CheckResult checkpoint_complete(const std::string& dir, int world) {
  for (int r = 0; r < world; ++r) {
    std::vector<nlohmann::json> saves;
    std::string err;
    if (!read_json_lines(in_run(dir, user_checkpoints_file(r)), saves, err) || saves.empty()) continue;
    const nlohmann::json& s = saves.front();
    return check_checkpoint_items(s.value("expected", std::vector<std::string>{}),
                                  s.value("found", std::vector<std::string>{}), s.value("path", std::string()));
  }
  return check_result(
      "checkpoint.complete", CheckStatus::fail,
      "the script never called dp.save(state, path): nothing checkpoints this run (use dp.save instead of "
      "torch.save for checkpoints)");
}

std::vector<std::map<std::string, std::string>> final_states(const std::string& dir, int world) {
  std::vector<std::map<std::string, std::string>> out(world);
  for (int r = 0; r < world; ++r) {
    std::vector<nlohmann::json> lines;
    std::string err;
    if (read_json_lines(in_run(dir, user_final_file(r)), lines, err)) out[r] = parse_final_state(lines);
  }
  return out;
}

CheckResult checkpoint_resume(Ladder& L, int world) {
  if (L.cmd.resume_arg.empty())
    return check_result(
        "checkpoint.resume", CheckStatus::skip,
        "not run: say how your script resumes, e.g. --resume-arg '--resume {ckpt}' ({ckpt} is the path the "
        "script gave dp.save)");
  const std::string straight = in_run(L.out, kCheckResumeStraight), killed = in_run(L.out, kCheckResumeKilled),
                    resumed = in_run(L.out, kCheckResumeResumed);
  UserLaunchResult a = L.launch(straight, {});
  if (a.exit_code != 0)
    return check_result("checkpoint.resume", CheckStatus::fail, "the straight run failed: " + a.message);
  // The killed run: rank 0 holds right after its save; we kill the whole job there, as a crash would.
  nlohmann::json save;
  auto saved = [&] {
    std::vector<nlohmann::json> lines;
    std::string err;
    if (!read_json_lines(in_run(killed, user_checkpoints_file(0)), lines, err)) return false;
    for (const auto& l : lines)
      if (l.value("index", 0) == kResumeFromSave && fs::exists(in_run(killed, l.value("copy", std::string("-"))))) {
        save = l;
        return true;
      }
    return false;
  };
  L.launch(killed, {{kEnvHoldAfterSave, std::to_string(kResumeFromSave)}}, {}, kMainHangTimeoutS, saved);
  if (save.is_null() && !saved())
    return check_result(
        "checkpoint.resume", CheckStatus::fail,
        "the script never called dp.save on rank 0, or called it only at the end: nothing to resume from");
  const std::string ckpt = fs::absolute(in_run(killed, save.value("copy", std::string()))).string();
  std::string arg = L.cmd.resume_arg;
  for (size_t p; (p = arg.find("{ckpt}")) != std::string::npos;) arg.replace(p, 6, ckpt);
  UserLaunchResult c = L.launch(resumed, {}, split_words(arg));
  if (c.exit_code != 0)
    return check_result(
        "checkpoint.resume", CheckStatus::fail,
        "resuming with '" + arg + "' failed: " + (c.last_error_line.empty() ? c.message : c.last_error_line));
  return judge_resume_states(final_states(straight, world), final_states(resumed, world), kResumeFromSave,
                             save.value("step", int64_t{0}));
}

bool verify_logs_readable(const std::string& dir, int world, std::string& err) {
  for (int r = 0; r < world; ++r)
    if (read_consumed(dir, r, err).empty()) return false;
  return true;
}

CheckResult faults_exit(Ladder& L, int world) {
  std::vector<FaultScenario> scenarios;
  const int rank = world > 1 ? 1 : 0;
  for (const std::string kind : {"kill", "throw", "hang"}) {
    FaultScenario s;
    s.kind = kind;
    s.rank = rank;
    const std::string dir = in_run(L.out, check_fault_run(kind));
    UserLaunchResult res = L.launch(
        dir, {{kEnvFault, kind + "," + std::to_string(rank) + "," + std::to_string(s.step)}}, {}, kFaultHangTimeoutS);
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
    s.traces_export = verify_logs_readable(dir, world, s.export_error);
    scenarios.push_back(s);
  }
  return judge_faults(scenarios);
}
}  // namespace

int run_user_check(const UserJobCommand& cmd) {
  Ladder L{cmd, absolute_path(cmd.out_dir.empty() ? default_run_folder() + "-check" : cmd.out_dir)};
  std::string err;
  if (!prepare_run_folder(L.out, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  auto wanted = [&](const std::string& id) {
    return cmd.checks.empty() || std::find(cmd.checks.begin(), cmd.checks.end(), id) != cmd.checks.end();
  };
  const std::string main_dir = in_run(L.out, kCheckMainRun);
  std::cout << "check run: " << main_dir << std::endl;
  UserLaunchResult main = L.launch(main_dir, {{kEnvVerifySteps, std::to_string(kVerifySteps)}});
  if (!main.started) {
    std::cerr << "ddp_profile: " << main.error << "\n";
    return 2;
  }
  const std::vector<nlohmann::json> metas = read_user_metas(main_dir);
  const std::string log = user_launch_log(main_dir);
  if (metas.empty()) {
    if (main.exit_code == 0) {
      std::cerr << "ddp_profile: the script never called ddp_profile.attach: add `dp = ddp_profile.attach(model, "
                   "optimizer, loss_fn=...)` after DDP(...) and iterate `dp.loader(loader)` (docs/python.md)\n";
      return 2;
    }
    std::cerr << "ddp_profile: the job failed before attach: "
              << (main.last_error_line.empty() ? main.message : main.last_error_line) << " (" << log << ")\n";
    return 1;
  }
  const nlohmann::json& meta0 = metas.front();
  const int world = meta0.value("world_size", 1);
  // Before its first step: no rank's heartbeat got past step 0 (a rank killed by its launcher never rewrote its meta,
  // so the heartbeats say how far the job got).
  int64_t steps_done = 0;
  for (const auto& r : main.ranks) steps_done = std::max(steps_done, r.steps);
  if (main.exit_code != 0 && steps_done == 0) {
    std::cerr << "ddp_profile: the job failed before its first step: "
              << (main.last_error_line.empty() ? main.message : main.last_error_line) << " (" << log << ")\n";
    return 1;
  }
  std::vector<CheckResult> results;
  bool shard_ok = true;
  for (const auto& id : check_ids()) {
    if (!wanted(id)) continue;
    std::cout << "  " << id << " ..." << std::flush;
    try {
      if (id == "checkpoint.resume") {
        results.push_back(checkpoint_resume(L, world));
      } else if (id == "faults.exit") {
        results.push_back(faults_exit(L, world));
      } else if (main.exit_code != 0) {
        results.push_back(check_result(id, CheckStatus::fail,
                                       "the check run failed: " + main.message +
                                           (main.last_error_line.empty() ? "" : " (" + main.last_error_line + ")")));
      } else if (id == "env.manifest") {
        std::vector<std::string> problems;
        results.push_back(check_manifest(read_manifest(main_dir, problems)));
      } else if (id == "data.shard_rule") {
        results.push_back(shard_rule(main_dir, world, meta0));
        shard_ok = results.back().status == CheckStatus::pass;
      } else if (id == "numerics.reference") {
        results.push_back(user_numerics_reference(main_dir, world, shard_ok, meta0, kVerifySteps));
      } else if (id == "numerics.rank_sync") {
        std::vector<std::map<int64_t, std::string>> h(world);
        for (int r = 0; r < world; ++r) h[r] = read_replica_hashes(main_dir, r, err);
        results.push_back(check_rank_sync(h));
      } else if (id == "comm.no_sync") {
        results.push_back(no_sync(main_dir, metas));
      } else if (id == "checkpoint.complete") {
        results.push_back(checkpoint_complete(main_dir, world));
      } else {
        results.push_back(check_result(id, CheckStatus::fail, "no ladder step judges this check id"));
      }
    } catch (const std::exception& e) {
      results.push_back(check_result(id, CheckStatus::fail, std::string("could not run: ") + e.what()));
    }
    std::cout << " " << status_name(results.back().status) << std::endl;
  }
  nlohmann::json j = checks_json(results);
  j["run"] = L.out;
  j["launch"] = cmd.launch;
  std::cout << "\n" << checks_table(results);
  if (!write_json_atomic(in_run(L.out, kChecksFile), j, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::cout << "\nchecks: " << in_run(L.out, kChecksFile) << std::endl;
  return j["failed"].get<int>() > 0 ? 1 : 0;
}

}  // namespace ddp
