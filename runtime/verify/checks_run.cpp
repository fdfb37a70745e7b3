// `ddp_profile --check`: runs the job with verification on, then the ladder — manifest, sampler rule, numerics
// against a single-rank reference, replica sync, no_sync, checkpoint completeness, exact resume after SIGKILL, and the
// failure exits — each judged by checks_logic.cpp, written to DIR/checks.json.
#include <signal.h>

#include <ATen/core/Dict.h>
#include <torch/nn/functional/loss.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "runtime/train/checkpoint.h"
#include "runtime/verify/checks.h"
#include "runtime/verify/checks_run.h"
#include "runtime/data/dataset.h"
#include "runtime/train/model.h"
#include "runtime/train/epoch_batches.h"
#include "runtime/launch/progress.h"
#include "runtime/data/dataset_cache.h"
#include "runtime/launch/job_inputs.h"
#include "runtime/launch/run_folder_setup.h"
#include "runtime/data/sampler.h"
#include "runtime/train/verify_log.h"
#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"
#include "runtime/common/json_file.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kVerifySteps = 3;
constexpr int64_t kCheckpointStep = 2;
constexpr int64_t kResumeSteps = 8, kResumeKill = 3;
// float32 defaults of torch.testing.assert_close.
constexpr double kRtol = 1.3e-6, kAtol = 1e-5;

CheckResult failed(const std::string& id, const std::string& why) { return check_result(id, CheckStatus::fail, why); }
// Nothing wrong was found, but the check could not judge: said, never a pass or a false fail.
CheckResult warned(const std::string& id, const std::string& why) { return check_result(id, CheckStatus::warn, why); }

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
  return args;
}

RunOutcome sub_run(const Command& base, const std::string& dir, const std::vector<std::string>& args,
                   double hang_timeout = -1) {
  Command c = base;
  c.out_dir = dir;
  if (hang_timeout > 0) c.job.hang_timeout_s = hang_timeout;
  std::string err;
  if (!prepare_run_folder(dir, err)) {
    RunOutcome o;
    o.exit_code = 1;
    o.message = err;
    return o;
  }
  RunOutcome o = supervise_run(c, args, /*quiet=*/true);
  if (o.exit_code == 130) {  // Ctrl-C: the user wants the ladder stopped, not the next check started
    std::cerr << "ddp_profile: --check interrupted\n";
    std::exit(130);
  }
  return o;
}

c10::impl::GenericDict load_dict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::pickle_load(bytes).toGenericDict();
}

at::Tensor tensor_at(const c10::impl::GenericDict& d, const std::string& key) {
  auto it = d.find(key);
  if (it == d.end()) throw std::runtime_error("missing tensor " + key);
  return it->value().toTensor();
}

std::vector<double> values(const at::Tensor& t) {
  at::Tensor c = t.detach().to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// --- numerics.reference ---------------------------------------------------------------------------------------
// Whether the model's train-mode forward is random, and whether switching its Dropout modules off makes it
// deterministic (then ranks and reference compare with dropout off; otherwise nothing can be compared).
struct RandomForward {
  int dropout_modules = 0;      // Dropout modules switched off for the comparison (0 when the forward is not random)
  bool beyond_dropout = false;  // still random with dropout off
};

RandomForward probe_random_forward(const JobConfig& job, const std::vector<int64_t>& shape, const at::Tensor& x) {
  RandomForward rf;
  Model probe(job, shape);  // its own copy: train-mode forwards move BatchNorm's running statistics
  if (!probe.forward_is_stochastic(x)) return rf;
  rf.dropout_modules = probe.set_dropout(false);
  rf.beyond_dropout = probe.forward_is_stochastic(x);
  return rf;
}

CheckResult numerics_reference(const JobConfig& job, const std::string& dir, int world, bool shard_ok) {
  std::string err;
  std::unique_ptr<Dataset> dataset = open_dataset(job, err);
  if (!dataset) return failed("numerics.reference", err);
  const Dataset& data = *dataset;
  std::vector<std::vector<ConsumedBatch>> consumed(world);
  for (int r = 0; r < world; ++r) {
    consumed[r] = read_consumed(dir, r, err);
    if (consumed[r].empty()) return failed("numerics.reference", err);
  }
  torch::nn::functional::CrossEntropyFuncOptions ce;
  if (job.loss_reduction == "sum") ce.reduction(torch::kSum);
  std::vector<NumericsEvidence> evidence;
  const std::vector<int64_t> shape = data.sample_shape();
  RandomForward random_forward;
  for (int64_t step = 0; step < kVerifySteps; ++step) {
    std::vector<c10::impl::GenericDict> dumps;
    for (int r = 0; r < world; ++r) {
      std::string f = in_run(dir, verify_step_file(r, step));
      if (!fs::exists(f)) break;
      dumps.push_back(load_dict(f));
    }
    if (static_cast<int>(dumps.size()) != world) break;
    // The reference: one process, the same pre-step weights, the union of what the ranks consumed at this step.
    Model ref(job, shape);
    ref.set_dropout(false);  // as the ranks ran their verified steps (worker.cpp): masks cannot be replayed here
    {
      torch::NoGradGuard ng;
      auto p0 = dumps[0].at("params").toGenericDict();
      for (auto& [k, t] : ref.named_parameters()) t.copy_(tensor_at(p0, k));
    }
    std::vector<TensorCompare> act_cmp;
    std::vector<std::string> kinds = ref.layer_kinds();
    for (int micro = 0; micro < job.accum_steps; ++micro) {
      std::vector<int64_t> idx;
      for (int r = 0; r < world; ++r)
        for (const auto& b : consumed[r])
          if (b.step == step && b.micro == micro) idx.insert(idx.end(), b.indices.begin(), b.indices.end());
      if (idx.empty()) return failed("numerics.reference", "no logged samples for step " + std::to_string(step));
      // Through the loader's own two stages, so decoding and augmentation are what the ranks saw.
      int epoch = 0;
      for (const auto& b : consumed[0])
        if (b.step == step) epoch = b.epoch;
      std::vector<int64_t> xshape = {static_cast<int64_t>(idx.size())};
      xshape.insert(xshape.end(), shape.begin(), shape.end());
      at::Tensor x = at::empty(xshape, at::kFloat);
      RawBatch raw;
      data.read(idx.data(), idx.size(), raw);
      data.transform(raw, idx.data(), idx.size(), epoch, x.data_ptr<float>());
      at::Tensor y = at::tensor(raw.labels, at::kLong);
      if (step == 0 && micro == 0) {
        random_forward = probe_random_forward(job, shape, x);
        if (random_forward.beyond_dropout)
          return warned("numerics.reference",
                        "not compared: the model's forward draws random numbers outside Dropout modules (two forwards "
                        "of one batch differ even with dropout off), so the ranks and a single-process reference "
                        "cannot see the same values; check this model with its randomness removed");
      }
      std::vector<std::pair<std::string, at::Tensor>> acts;
      at::Tensor loss = torch::nn::functional::cross_entropy(ref.forward(x, &acts), y, ce);
      if (job.accum_steps > 1) loss = loss / job.accum_steps;
      loss.backward();
      // The ranks' activations, concatenated in rank order, against the reference's on the union batch.
      for (size_t l = 0; l < acts.size(); ++l) {
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world; ++r)
          parts.push_back(tensor_at(dumps[r].at("acts").toGenericDict().at(std::to_string(micro)).toGenericDict(),
                                    acts[l].first));
        TensorCompare c = compare_values(acts[l].first, values(at::cat(parts)), values(acts[l].second), kRtol, kAtol);
        if (micro == 0) act_cmp.push_back(c);
        else if (!c.ok && act_cmp[l].ok) act_cmp[l] = c;
      }
    }
    for (int r = 0; r < world; ++r) {
      NumericsEvidence ev;
      ev.step = step;
      ev.rank = r;
      ev.activations = act_cmp;
      ev.layer_kinds = kinds;
      ev.samples_follow_rule = shard_ok;
      auto grads = dumps[r].at("grads").toGenericDict();
      for (auto& [k, t] : ref.named_parameters())
        ev.grads.push_back(compare_values(k, values(tensor_at(grads, k)), values(t.grad()), kRtol, kAtol));
      evidence.push_back(ev);
    }
  }
  if (evidence.empty()) return failed("numerics.reference", "no tensor dumps in " + in_run(dir, kVerifyDir));
  CheckResult r = judge_numerics(evidence, world, kRtol, kAtol);
  if (random_forward.dropout_modules > 0) {
    // Say exactly what was compared: the same model with its Dropout modules off, everything else in train mode.
    r.summary += " (the forward is stochastic: compared with its " + std::to_string(random_forward.dropout_modules) +
                 " Dropout module(s) off in the verified steps, BatchNorm and the rest in train mode)";
    r.details["dropout_off_modules"] = random_forward.dropout_modules;
  }
  return r;
}

// --- checkpoint.resume ----------------------------------------------------------------------------------------
// Dict keys are names, or parameter indices in the optimizer's state (PyTorch's layout).
std::string key_text(const c10::IValue& k) { return k.isString() ? k.toStringRef() : k.isInt() ? std::to_string(k.toInt()) : k.tagKind(); }

std::string compare_trees(const c10::IValue& a, const c10::IValue& b, const std::string& path) {
  if ((a.isList() && b.isList()) || (a.isTuple() && b.isTuple())) {
    const auto& ea = a.isList() ? a.toListRef() : a.toTupleRef().elements();
    const auto& eb = b.isList() ? b.toListRef() : b.toTupleRef().elements();
    if (ea.size() != eb.size()) return path.substr(0, path.size() - 1) + " differs in length";
    for (size_t i = 0; i < ea.size(); ++i)
      if (std::string d = compare_trees(ea[i], eb[i], path + std::to_string(i) + "."); !d.empty()) return d;
    return {};
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto da = a.toGenericDict(), db = b.toGenericDict();
    for (const auto& kv : da) {
      std::string k = key_text(kv.key());
      auto it = db.find(kv.key());
      if (it == db.end()) return path + k + " missing in the resumed run";
      std::string d = compare_trees(kv.value(), it->value(), path + k + ".");
      if (!d.empty()) return d;
    }
    if (da.size() != db.size()) return path + " has different items";
    return {};
  }
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor &ta = a.toTensor(), &tb = b.toTensor();
    if (ta.sizes() != tb.sizes() || ta.scalar_type() != tb.scalar_type()) return path + " differs in shape or dtype";
    at::Tensor ca = ta.contiguous(), cb = tb.contiguous();
    if (std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) != 0) {
      double diff = (ta.to(at::kDouble) - tb.to(at::kDouble)).abs().max().item<double>();
      return path.substr(0, path.size() - 1) + " differs (max |diff| " + std::to_string(diff) + ")";
    }
    return {};
  }
  if (a != b && !(a.isDouble() && b.isDouble() && a.toDouble() == b.toDouble()))
    return path.substr(0, path.size() - 1) + " differs";
  return {};
}

CheckResult checkpoint_resume(const Command& cmd, const std::vector<std::string>& args, const std::string& out,
                              int world) {
  const std::string straight = in_run(out, kCheckResumeStraight), killed = in_run(out, kCheckResumeKilled),
                    resumed = in_run(out, kCheckResumeResumed);
  const std::string N = std::to_string(kResumeSteps), K = std::to_string(kResumeKill);
  RunOutcome a = sub_run(cmd, straight, with(args, {"--max-steps", N, "--checkpoint-steps", N, "--no-record"}));
  if (a.exit_code != 0) return failed("checkpoint.resume", "the straight run failed: " + a.message);
  // The interrupted run: checkpoint after step K, then hold (rank 0 hangs at K+2) until every rank is SIGKILLed.
  RunOutcome b;
  std::thread t([&] {
    b = sub_run(cmd, killed,
                with(args, {"--max-steps", N, "--checkpoint-steps", K, "--inject-fault",
                            "rank=0,step=" + std::to_string(kResumeKill + 2) + ",kind=hang", "--hang-timeout", "120",
                            "--no-record"}),
                120);
  });
  const std::string ck = checkpoint_dir(killed, kResumeKill);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool ready = false;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    ready = read_progress(progress_file(killed, 0)).step >= kResumeKill + 2;
    for (int r = 0; r < world; ++r) ready = ready && fs::exists(checkpoint_sidecar(checkpoint_file(ck, r)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < world; ++r) {
    ProgressSnapshot p = read_progress(progress_file(killed, r));
    if (p.pid > 0) {
      ::kill(-p.pid, SIGKILL);
      ::kill(p.pid, SIGKILL);
    }
  }
  t.join();
  if (!ready) return failed("checkpoint.resume", "the interrupted run never wrote its step-" + K + " checkpoint: " + b.message);
  RunOutcome c = sub_run(cmd, resumed,
                         with(args, {"--max-steps", N, "--checkpoint-steps", N, "--resume-from", ck, "--no-record"}));
  if (c.exit_code != 0) return failed("checkpoint.resume", "resuming from " + ck + " failed: " + c.message);
  nlohmann::json d = {{"steps", kResumeSteps}, {"killed_after", kResumeKill}, {"ranks", nlohmann::json::array()}};
  for (int r = 0; r < world; ++r) {
    std::string fa = checkpoint_file(checkpoint_dir(straight, kResumeSteps), r);
    std::string fc = checkpoint_file(checkpoint_dir(resumed, kResumeSteps), r);
    std::string diff;
    try {
      diff = compare_trees(c10::IValue(load_dict(fa)), c10::IValue(load_dict(fc)), "");
    } catch (const std::exception& e) {
      diff = e.what();
    }
    d["ranks"].push_back({{"rank", r}, {"identical", diff.empty()}, {"first_difference", diff}});
    if (!diff.empty()) {
      CheckResult res = failed("checkpoint.resume", "rank " + std::to_string(r) + " after resume: " + diff +
                                                        " (state missing from the checkpoint, or data order not restored)");
      res.details = d;
      return res;
    }
  }
  CheckResult res;
  res.id = "checkpoint.resume";
  res.status = CheckStatus::pass;
  res.summary = "ran " + N + " steps straight; separately " + K + " steps, checkpoint, SIGKILL of every rank, fresh ranks resumed to " +
                N + ": parameters, AdamW state, scaler, position and RNG bitwise identical on all ranks";
  res.details = d;
  return res;
}

// --- faults.exit ------------------------------------------------------------------------------------------------
CheckResult faults_exit(const Command& cmd, const std::vector<std::string>& args, const std::string& out, int world) {
  std::vector<FaultScenario> scenarios;
  const int rank = world > 1 ? 1 : 0;
  for (const char* kind : {"throw", "kill", "hang", "exit0"}) {
    FaultScenario s;
    s.kind = kind;
    s.rank = rank;
    std::string dir = in_run(out, check_fault_run(s.kind));
    s.outcome = sub_run(cmd, dir,
                        with(args, {"--inject-fault", "rank=" + std::to_string(rank) + ",step=" + std::to_string(s.step) +
                                                          ",kind=" + s.kind,
                                    "--hang-timeout", "3"}),
                        3);
    s.traces_export = export_fault_run_traces(dir, world, s.export_error);
    scenarios.push_back(s);
  }
  return judge_faults(scenarios);
}
}  // namespace

int run_check(const Command& cmd_in, const std::vector<std::string>& job_args) {
  Command cmd = cmd_in;
  const std::string out = absolute_path(cmd.out_dir.empty() ? default_run_folder() + "-check" : cmd.out_dir);
  std::string err;
  if (!prepare_run_folder(out, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  if (!validate_job_inputs(cmd.job, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;  // the user's input: the ladder does not start
  }
  const DatasetPath where = dataset_path_source(cmd.job);
  if (cmd.job.data_path.empty()) cmd.job.data_path = default_data_path(in_run(out, kCheckMainRun), cmd.job);
  cmd.job.data_path = absolute_path(cmd.job.data_path);
  if (!ensure_dataset(cmd.job, where, err, true)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;  // the user's input: the ladder does not start
  }
  if (std::unique_ptr<Dataset> data = open_dataset(cmd.job, err)) fit_job_to_dataset(cmd.job, *data);
  const JobConfig& job = cmd.job;
  const int world = job.nproc;
  auto wanted = [&](const std::string& id) {
    return cmd.checks.empty() || std::find(cmd.checks.begin(), cmd.checks.end(), id) != cmd.checks.end();
  };
  std::vector<CheckResult> results;
  const std::string main_dir = in_run(out, kCheckMainRun);
  bool need_main = false;
  for (const CheckInfo& c : kChecks) need_main |= c.judged_on_main_run && wanted(c.id);
  RunOutcome main_run;
  if (need_main) {
    std::cout << "check run: " << main_dir << std::endl;
    main_run = sub_run(cmd, main_dir,
                       with(job_args, {"--verify-steps", std::to_string(kVerifySteps), "--checkpoint-steps",
                                       std::to_string(kCheckpointStep)}));
  }
  // A usage error the ranks found (their stderr says which) is not eight failed checks: the ladder stops.
  if (need_main && main_run.exit_code == 2) {
    std::cerr << "ddp_profile: the check run stopped at a usage error (see above)\n";
    return 2;
  }
  auto main_failed = [&](const std::string& id) {
    results.push_back(failed(id, "the check run failed: " + main_run.message));
  };
  bool shard_ok = true;
  for (const auto& id : check_ids()) {
    if (!wanted(id)) continue;
    std::cout << "  " << id << " ..." << std::flush;
    try {
      if (id == "checkpoint.resume") {
        results.push_back(checkpoint_resume(cmd, job_args, out, world));
      } else if (id == "faults.exit") {
        results.push_back(faults_exit(cmd, job_args, out, world));
      } else if (main_run.exit_code != 0) {
        main_failed(id);
      } else if (id == "env.manifest") {
        std::vector<std::string> problems;
        results.push_back(check_manifest(read_manifest(main_dir, problems)));
      } else if (id == "data.shard_rule") {
        std::vector<std::vector<ConsumedBatch>> per_rank(world);
        for (int r = 0; r < world; ++r) per_rank[r] = read_consumed(main_dir, r, err);
        std::unique_ptr<Dataset> dataset = open_dataset(job, err);
        if (!dataset) throw std::runtime_error(err);
        const Dataset& data = *dataset;
        auto expected = [&](int epoch, int rank) {
          std::vector<int64_t> flat;
          for (auto& x : epoch_batches(data.samples(), job, epoch, rank, world)) flat.insert(flat.end(), x.begin(), x.end());
          return flat;
        };
        results.push_back(check_shard_rule(per_rank, data.samples(), job.shuffle, expected));
        shard_ok = results.back().status == CheckStatus::pass;
      } else if (id == "numerics.reference") {
        results.push_back(numerics_reference(job, main_dir, world, shard_ok));
      } else if (id == "numerics.rank_sync") {
        std::vector<std::map<int64_t, std::string>> h(world);
        for (int r = 0; r < world; ++r) h[r] = read_replica_hashes(main_dir, r, err);
        results.push_back(check_rank_sync(h));
      } else if (id == "comm.no_sync") {
        RunTrace run;
        if (!job.record) {
          CheckResult r;
          r.id = id;
          r.status = CheckStatus::skip;
          r.summary = "--no-record: no traces to count allreduces in";
          results.push_back(r);
        } else if (!load_run(main_dir, run, err)) {
          results.push_back(failed(id, err));
        } else {
          std::vector<std::string> problems;
          nlohmann::json m = read_manifest(main_dir, problems);
          if (!m.is_object()) m = nlohmann::json::object();
          uint64_t param_bytes = m.value("param_bytes", uint64_t{0});
          results.push_back(check_no_sync(run, job.accum_steps, m["gradient_buckets"].size(), param_bytes));
        }
      } else if (id == "checkpoint.complete") {
        std::unique_ptr<Dataset> dataset = open_dataset(job, err);
        if (!dataset) throw std::runtime_error(err);
        Model model(job, dataset->sample_shape());
        CheckResult worst;
        for (int r = 0; r < world; ++r) {
          std::string f = checkpoint_file(checkpoint_dir(main_dir, kCheckpointStep), r);
          CheckResult c = check_checkpoint_items(expected_checkpoint_items(model), checkpoint_items(f), f);
          if (r == 0 || c.status == CheckStatus::fail) worst = c;
          if (c.status == CheckStatus::fail) break;
        }
        results.push_back(worst);
      } else {
        // An id in check_ids.h this ladder does not know: a programming error, said instead of skipped.
        results.push_back(failed(id, "no ladder step judges this check id"));
      }
    } catch (const std::exception& e) {
      results.push_back(failed(id, std::string("could not run: ") + e.what()));
    }
    std::cout << " " << status_name(results.back().status) << std::endl;
  }
  nlohmann::json j = checks_json(results);
  j["run"] = out;
  std::cout << "\n" << checks_table(results);
  if (!write_json_atomic(in_run(out, kChecksFile), j, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::cout << "\nchecks: " << in_run(out, kChecksFile) << std::endl;
  return j["failed"].get<int>() > 0 ? 1 : 0;
}

}  // namespace ddp
