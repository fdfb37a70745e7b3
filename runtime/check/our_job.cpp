// The ladder's subject that is our own job: the verification run, the resume runs and the fault runs are supervised
// runs of this binary's ranks (runtime/launch/supervisor/supervisor.h); the single-rank reference is computed here with
// the same model code the ranks run.
#include "runtime/check/our_job.h"

#include <signal.h>
#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "runtime/check/judges.h"
#include "runtime/check/ladder.h"
#include "runtime/check/subject.h"
#include "runtime/check/tensor_files.h"
#include "runtime/common/run_folder_setup.h"
#include "runtime/data/dataset.h"
#include "runtime/data/dataset_cache.h"
#include "runtime/launch/cli/job_inputs.h"
#include "runtime/launch/heartbeat/progress.h"
#include "runtime/launch/supervisor/supervisor.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/epoch_batches.h"
#include "runtime/train/model.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kCheckpointStep = 2;  // the main run's checkpoint, which checkpoint.complete opens
constexpr int64_t kResumeSteps = 8, kResumeKill = 3;

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more);
  return args;
}

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

// Dict keys are names, or parameter indices in the optimizer's state (PyTorch's layout).
std::string key_text(const c10::IValue& k) {
  return k.isString() ? k.toStringRef() : k.isInt() ? std::to_string(k.toInt()) : k.tagKind();
}

// Two checkpoint trees, leaf by leaf: the first leaf that differs (its dotted path and how), and how many matched.
struct TreeDiff {
  std::string item, how;
  size_t items = 0;
};
bool compare_trees(const c10::IValue& a, const c10::IValue& b, const std::string& path, TreeDiff& d) {
  const std::string here = path.empty() ? std::string("(root)") : path;
  auto differs = [&](const std::string& how) {
    d.item = here;
    d.how = how;
    return false;
  };
  auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if ((a.isList() && b.isList()) || (a.isTuple() && b.isTuple())) {
    const auto& ea = a.isList() ? a.toListRef() : a.toTupleRef().elements();
    const auto& eb = b.isList() ? b.toListRef() : b.toTupleRef().elements();
    if (ea.size() != eb.size()) return differs("differs in length");
    for (size_t i = 0; i < ea.size(); ++i)
      if (!compare_trees(ea[i], eb[i], child(std::to_string(i)), d)) return false;
    return true;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto da = a.toGenericDict(), db = b.toGenericDict();
    for (const auto& kv : da) {
      auto it = db.find(kv.key());
      if (it == db.end()) {
        d.item = child(key_text(kv.key()));
        d.how = "is missing in the resumed run";
        return false;
      }
      if (!compare_trees(kv.value(), it->value(), child(key_text(kv.key())), d)) return false;
    }
    if (da.size() != db.size()) return differs("has different items");
    return true;
  }
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor &ta = a.toTensor(), &tb = b.toTensor();
    if (ta.sizes() != tb.sizes() || ta.scalar_type() != tb.scalar_type()) return differs("differs in shape or dtype");
    at::Tensor ca = ta.contiguous(), cb = tb.contiguous();
    if (std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) != 0) {
      double diff = (ta.to(at::kDouble) - tb.to(at::kDouble)).abs().max().item<double>();
      return differs("differs (max |diff| " + std::to_string(diff) + ")");
    }
    ++d.items;
    return true;
  }
  if (a != b && !(a.isDouble() && b.isDouble() && a.toDouble() == b.toDouble())) return differs("differs");
  ++d.items;
  return true;
}

class OurJob final : public CheckSubject {
 public:
  OurJob(const Command& cmd, std::vector<std::string> job_args) : cmd_(cmd), args_(std::move(job_args)) {}

  SubjectKind kind() const override { return kOurJob; }
  const char* what() const override { return "our job"; }
  bool own_runs_need_main_run() const override { return false; }

  int prepare(const std::string& out) override {
    std::string err;
    if (!validate_job_inputs(cmd_.job, err)) return usage_error(err);
    const DatasetPath where = dataset_path_source(cmd_.job);
    if (cmd_.job.data_path.empty()) cmd_.job.data_path = default_data_path(in_run(out, kCheckMainRun), cmd_.job);
    cmd_.job.data_path = absolute_path(cmd_.job.data_path);
    if (!ensure_dataset(cmd_.job, where, err, true)) return usage_error(err);
    if (std::unique_ptr<Dataset> data = open_dataset(cmd_.job, err)) fit_job_to_dataset(cmd_.job, *data);
    return kGoOn;
  }

  int run_main(const std::string& dir, MainRun& main) override {
    RunOutcome o = sub_run(dir, with(args_, {"--verify-steps", std::to_string(kVerifySteps), "--checkpoint-steps",
                                             std::to_string(kCheckpointStep)}));
    // A usage error the ranks found (their stderr says which) is not eight failed checks: the ladder stops.
    if (o.exit_code == 2) {
      std::cerr << "ddp_profile: the check run stopped at a usage error (see above)\n";
      return 2;
    }
    main.world = cmd_.job.nproc;
    main.ok = o.exit_code == 0;
    main.failure = o.message;
    return kGoOn;
  }

  ShardExpectation shard_expectation(const MainRun&) override {
    std::string err;
    std::shared_ptr<Dataset> data(open_dataset(cmd_.job, err));
    if (!data) throw std::runtime_error(err);
    ShardExpectation e;
    e.dataset_size = data->samples();
    e.shuffle = cmd_.job.shuffle;
    const JobConfig job = cmd_.job;
    e.expected = [data, job](int epoch, int rank) {
      std::vector<int64_t> flat;
      for (auto& x : epoch_batches(data->samples(), job, epoch, rank, job.nproc))
        flat.insert(flat.end(), x.begin(), x.end());
      return flat;
    };
    return e;
  }

  NumericsOutcome numerics(const MainRun& main, bool shard_ok) override;

  NoSyncEvidence no_sync(const MainRun& main) override {
    NoSyncEvidence e;
    if (!cmd_.job.record) {
      e.skipped = "--no-record: no traces to count allreduces in";
      return e;
    }
    if (!main.manifest) {
      e.failure = main.manifest_error;
      return e;
    }
    const records::manifest& m = main.manifest->fields;
    if (!m.gradient_buckets || !m.param_bytes) {
      e.failure = in_run(main.dir, kManifestFile) + ": no gradient_buckets or param_bytes (the run did not end)";
      return e;
    }
    RunTrace run;
    run.manifest = main.manifest;
    if (!load_rank_traces(main.dir, run, e.failure)) return e;
    if (!run.problems.empty()) {  // a damaged or missing rank trace: its allreduces cannot be counted
      e.failure = run.problems.front();
      return e;
    }
    return no_sync_from_trace(run, cmd_.job.accum_steps, m.gradient_buckets->size(), *m.param_bytes);
  }

  CheckpointEvidence checkpoints(const MainRun& main) override {
    std::string err;
    std::unique_ptr<Dataset> dataset = open_dataset(cmd_.job, err);
    if (!dataset) throw std::runtime_error(err);
    Model model(cmd_.job, dataset->sample_shape());
    CheckpointEvidence e;
    // The files whole as written (atomically, with their sidecar's size and CRC-32), before what they hold.
    if (!verify_checkpoint_files(checkpoint_dir(main.dir, kCheckpointStep), main.world, e.failure)) return e;
    for (int r = 0; r < main.world; ++r) {
      const std::string f = checkpoint_file(checkpoint_dir(main.dir, kCheckpointStep), r);
      CheckpointContents c;
      c.file = f;
      c.expected = expected_checkpoint_items(model);
      c.found = checkpoint_items(f);
      e.files.push_back(std::move(c));
    }
    return e;
  }

  // Our ranks log their memory per step in the companion's layout; the rest of the training log is the companion's
  // (our job's learning is proven by numerics.reference against its own single-rank reference).
  TrainingEvidence training(const MainRun& main) override {
    return read_training(main.dir, main.world, TrainingFields::memory);
  }
  DatasetEvidence datasets(const MainRun&) override {
    return {"our job reads one dataset file on every rank (its digest is in the manifest)", {}};
  }

  ResumeEvidence resume(const std::string& out, const MainRun& main) override;
  std::vector<FaultScenario> faults(const std::string& out, const MainRun& main) override;

 private:
  int usage_error(const std::string& why) {
    std::cerr << "ddp_profile: " << why << "\n";
    return 2;  // the user's input: the ladder does not start
  }

  RunOutcome sub_run(const std::string& dir, const std::vector<std::string>& args, double hang_timeout = -1) {
    Command c = cmd_;
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

  Command cmd_;
  std::vector<std::string> args_;
};

NumericsOutcome OurJob::numerics(const MainRun& main, bool shard_ok) {
  NumericsOutcome out;
  out.world = main.world;
  const JobConfig& job = cmd_.job;
  std::string err;
  std::unique_ptr<Dataset> dataset = open_dataset(job, err);
  if (!dataset) {
    out.failure = err;
    return out;
  }
  const Dataset& data = *dataset;
  const int world = main.world;
  std::vector<std::vector<ConsumedBatch>> consumed(world);
  for (int r = 0; r < world; ++r) {
    consumed[r] = read_consumed(main.dir, r, err);
    if (consumed[r].empty()) {
      out.failure = err.empty() ? "rank " + std::to_string(r) + " logged no batches (" +
                                      in_run(main.dir, verify_samples_file(r)) + ")"
                                : err;
      return out;
    }
  }
  torch::nn::functional::CrossEntropyFuncOptions ce;
  if (job.loss_reduction == "sum") ce.reduction(torch::kSum);
  const std::vector<int64_t> shape = data.sample_shape();
  RandomForward random_forward;
  for (int64_t step = 0; step < kVerifySteps; ++step) {
    // A step no rank dumped is past the run's end; a step some ranks dumped and another did not is a lost file.
    std::vector<TensorDict> dumps;
    std::string missing;
    for (int r = 0; r < world; ++r) {
      std::string f = in_run(main.dir, verify_step_file(r, step));
      if (fs::exists(f))
        dumps.push_back(load_tensor_dict(f));
      else if (missing.empty())
        missing = f;
    }
    if (dumps.empty()) break;
    if (!missing.empty()) {
      out.failure = missing + " is missing: rank 0.." + std::to_string(world - 1) + " dumped step " +
                    std::to_string(step) + " but this rank did not";
      return out;
    }
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
      if (idx.empty()) {
        out.failure = "no logged samples for step " + std::to_string(step);
        return out;
      }
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
        if (random_forward.beyond_dropout) {
          out.not_compared =
              "not compared: the model's forward draws random numbers outside Dropout modules (two forwards of one "
              "batch differ even with dropout off), so the ranks and a single-process reference cannot see the same "
              "values; check this model with its randomness removed";
          return out;
        }
      }
      std::vector<std::pair<std::string, at::Tensor>> acts;
      at::Tensor loss = torch::nn::functional::cross_entropy(ref.forward(x, &acts), y, ce);
      if (job.accum_steps > 1) loss = loss / job.accum_steps;
      loss.backward();
      // The ranks' activations, concatenated in rank order, against the reference's on the union batch.
      for (size_t l = 0; l < acts.size(); ++l) {
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world; ++r)
          parts.push_back(
              tensor_at(dumps[r].at("acts").toGenericDict().at(std::to_string(micro)).toGenericDict(), acts[l].first));
        TensorCompare c = compare_values(acts[l].first, tensor_values(at::cat(parts)), tensor_values(acts[l].second),
                                         kFloat32Rtol, kFloat32Atol);
        if (micro == 0)
          act_cmp.push_back(c);
        else if (!c.ok && act_cmp[l].ok)
          act_cmp[l] = c;
      }
    }
    for (int r = 0; r < world; ++r) {
      NumericsEvidence ev = numerics_step(step, r, act_cmp, kinds, shard_ok);
      auto grads = dumps[r].at("grads").toGenericDict();
      for (auto& [k, t] : ref.named_parameters())
        ev.grads.push_back(
            compare_values(k, tensor_values(tensor_at(grads, k)), tensor_values(t.grad()), kFloat32Rtol, kFloat32Atol));
      out.steps.push_back(ev);
    }
  }
  if (out.steps.empty()) out.failure = "no tensor dumps in " + in_run(main.dir, kVerifyDir);
  out.dropout_off_modules = random_forward.dropout_modules;
  return out;
}

ResumeEvidence OurJob::resume(const std::string& out, const MainRun&) {
  ResumeEvidence e;
  const int world = cmd_.job.nproc;
  const std::string straight = in_run(out, kCheckResumeStraight), killed = in_run(out, kCheckResumeKilled),
                    resumed = in_run(out, kCheckResumeResumed);
  const std::string N = std::to_string(kResumeSteps), K = std::to_string(kResumeKill);
  e.killed = "killed (SIGKILL, every rank) after its step-" + K + " checkpoint";
  e.details = {{"steps", kResumeSteps}, {"killed_after", kResumeKill}};
  RunOutcome a = sub_run(straight, with(args_, {"--max-steps", N, "--checkpoint-steps", N, "--no-record"}));
  if (a.exit_code != 0) {
    e.failed = "the straight run failed: " + a.message;
    return e;
  }
  // The interrupted run: checkpoint after step K, then hold (rank 0 hangs at K+2) until every rank is SIGKILLed.
  RunOutcome b;
  std::thread t([&] {
    b = sub_run(killed,
                with(args_, {"--max-steps", N, "--checkpoint-steps", K, "--inject-fault",
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
  if (!ready) {
    e.failed = "the interrupted run never wrote its step-" + K + " checkpoint: " + b.message;
    return e;
  }
  RunOutcome c =
      sub_run(resumed, with(args_, {"--max-steps", N, "--checkpoint-steps", N, "--resume-from", ck, "--no-record"}));
  if (c.exit_code != 0) {
    e.failed = "resuming from " + ck + " failed: " + c.message;
    return e;
  }
  for (int r = 0; r < world; ++r) {
    RankResume rr;
    rr.rank = r;
    TreeDiff d;
    try {
      compare_trees(c10::IValue(load_tensor_dict(checkpoint_file(checkpoint_dir(straight, kResumeSteps), r))),
                    c10::IValue(load_tensor_dict(checkpoint_file(checkpoint_dir(resumed, kResumeSteps), r))), "", d);
    } catch (const std::exception& ex) {  // a file that does not read is no difference found: the check fails on it
      e.failed = std::string("a final checkpoint does not read: ") + ex.what();
      return e;
    }
    rr.items = d.items;
    rr.first_difference = d.item;
    rr.difference = d.how;
    e.ranks.push_back(rr);
  }
  return e;
}

std::vector<FaultScenario> OurJob::faults(const std::string& out, const MainRun&) {
  std::vector<FaultScenario> scenarios;
  const int world = cmd_.job.nproc;
  const int rank = world > 1 ? 1 : 0;
  for (const char* kind : {"throw", "kill", "hang", "exit0"}) {
    FaultScenario s;
    s.kind = kind;
    s.rank = rank;
    std::string dir = in_run(out, check_fault_run(s.kind));
    s.outcome =
        sub_run(dir,
                with(args_, {"--inject-fault",
                             "rank=" + std::to_string(rank) + ",step=" + std::to_string(s.step) + ",kind=" + s.kind,
                             "--hang-timeout", "3"}),
                3);
    s.traces_export = export_fault_run_traces(dir, world, s.export_error);
    scenarios.push_back(s);
  }
  return scenarios;
}
}  // namespace

int run_check(const Command& cmd, const std::vector<std::string>& job_args) {
  OurJob job(cmd, job_args);
  return run_ladder(job, cmd.checks, check_run_folder(cmd.out_dir));
}

}  // namespace ddp
