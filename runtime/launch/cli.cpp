#include "runtime/launch/cli.h"

#include <CLI/CLI.hpp>

#include <map>
#include <sstream>

#include "traces/kineto/kineto_map.h"
#include "traces/base/parse_int.h"

namespace ddp {
namespace {
bool parse_kv(const std::string& text, std::map<std::string, std::string>& kv, std::string& error) {
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size()) {
      error = "expected key=value, got '" + part + "'";
      return false;
    }
    kv[part.substr(0, eq)] = part.substr(eq + 1);
  }
  return true;
}

}  // namespace

bool parse_slow_spec(const std::string& text, SlowSpec& out, std::string& error) {
  std::map<std::string, std::string> kv;
  if (!parse_kv(text, kv, error)) return false;
  if (!kv.count("rank") || !kv.count("stage") || !kv.count("ms") || kv.size() != 3) {
    error = "--slow needs exactly rank=R,stage=S,ms=M";
    return false;
  }
  if (!parse_int(kv["rank"].c_str(), out.rank) || out.rank < 0) {
    error = "--slow: rank must be a non-negative integer";
    return false;
  }
  auto st = stage_from_name(kv["stage"]);
  if (!st || !stage_has(*st, kStageSlowable)) {
    error = "--slow: stage must be one of " + stage_names_with(kStageSlowable);
    return false;
  }
  out.stage = *st;
  try {
    size_t pos = 0;
    out.ms = std::stod(kv["ms"], &pos);
    if (pos != kv["ms"].size() || out.ms < 0 || out.ms > 60000) throw 0;
  } catch (...) {
    error = "--slow: ms must be a number between 0 and 60000";
    return false;
  }
  return true;
}

bool parse_fault_spec(const std::string& text, FaultSpec& out, std::string& error) {
  std::map<std::string, std::string> kv;
  if (!parse_kv(text, kv, error)) return false;
  if (!kv.count("rank") || !kv.count("step") || !kv.count("kind") || kv.size() != 3) {
    error = "--inject-fault needs exactly rank=R,step=S,kind=throw|kill|hang|exit0";
    return false;
  }
  if (!parse_int(kv["rank"].c_str(), out.rank) || out.rank < 0 || !parse_int(kv["step"].c_str(), out.step) || out.step < 0) {
    error = "--inject-fault: rank and step must be non-negative integers";
    return false;
  }
  out.kind = kv["kind"];
  if (out.kind != "throw" && out.kind != "kill" && out.kind != "hang" && out.kind != "exit0") {
    error = "--inject-fault: kind must be throw, kill, hang or exit0";
    return false;
  }
  return true;
}

ParseResult parse_command_line(int argc, const char* const* argv) {
  ParseResult r;
  Command& c = r.cmd;
  JobConfig& j = c.job;
  CLI::App app{
      "ddp_profile: run a two-rank data-parallel LibTorch job, record every stage of its data path, and prove it "
      "right.\nExit codes: 0 success, 1 a run, rank or check failed, 2 usage error.",
      "ddp_profile"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  bool record = false, check = false, worker = false;
  auto* g_mode = app.add_option_group("Modes", "exactly one");
  g_mode->add_flag("--record", record, "run the job and record it (supervisor: starts --nproc ranks)");
  g_mode->add_flag("--check", check, "run the closed-loop checks -> DIR/checks.json");
  // Each takes one run folder, or PyTorch profiler (Kineto) traces: a folder of them or the files (docs/kineto.md).
  auto inputs = [&](const char* name, const char* help) {
    g_mode->add_option(name, c.inputs, help)
        ->expected(1, CLI::detail::expected_max_vector_size)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  inputs("--export", "rebuild DIR/trace.json (Chrome/Perfetto) from the native traces; or merge per-rank PyTorch "
                     "profiler traces (TRACES..., with -o) into one aligned trace");
  inputs("--summary", "per-rank step count, step time, time per stage, bytes (DIR or TRACES...)");
  inputs("--analyze", "stalls with their cross-rank root causes (DIR or TRACES...)");
  g_mode->add_option("--diff", c.diff_dirs, "what changed between two runs")->expected(2);
  g_mode->add_flag("--worker", worker, "run as one rank (used by the supervisor and external launchers)");
  g_mode->require_option(1);

  auto* g_out = app.add_option_group("Output");
  g_out->add_option("--out", c.out_dir, "run folder to write (default: runs/<timestamp>)");
  g_out->add_option("-o,--output", c.output_file,
                    "with --export: the JSON file to write (default DIR/trace.json); with --format kineto: the folder");
  auto* format = g_out->add_option("--format", c.export_format,
                                   "with --export: chrome (one trace, default) or kineto (one of our runs as per-rank "
                                   "PyTorch profiler traces in the folder -o DIR, for HTA)")
                     ->check(CLI::IsMember({"chrome", "kineto"}));
  g_out->add_flag("--json", c.json, "with --summary/--analyze: print JSON");
  std::vector<int> cycles;
  g_out->add_option("--cycle", cycles, "with Kineto traces of several profiling cycles: only cycle N (1-based); "
                                       "--diff A B --cycle N M compares A's cycle N with B's cycle M")
      ->expected(1, 2)
      ->check(CLI::PositiveNumber);
  std::string steps;
  g_out->add_option("--steps", steps, "with --export/--summary/--analyze: only steps A-B (or one step A)");
  g_out->add_option("--map", c.maps, "with Kineto traces: REGEX=STAGE, events whose name matches are that stage "
                                     "(repeatable; tried before the built-in names)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // Validated by the ladder (runtime/check/check_table.h owns the ids) before anything starts.
  g_out->add_option("--checks", c.checks, "with --check: run only these check ids (comma separated; docs/checks.md)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  std::vector<std::string> slow, ckpt;
  std::string fault;
  bool no_record = false, pageable = false, no_shuffle = false, keep_last = false, no_pin = false,
       no_batch_sched = false;
  auto* g_job = app.add_option_group("Job options");
  g_job->add_option("--dataset", j.dataset,
                            "synthetic (default: 128-feature .ddpd file) or images[:DIR] (an image folder, generated "
                            "when DIR has no index.txt; decoded, randomly cropped and normalised on the workers; CNN)")
              ->check([](const std::string& d) {
                if (d == "synthetic" || d == "images" || (d.rfind("images:", 0) == 0 && d.size() > 7))
                  return std::string();
                return std::string("--dataset must be synthetic, images or images:DIR");
              });
  g_job->add_option("--data", j.data_path, "dataset file (.ddpd); generated when missing (synthetic)");
  g_job->add_option("--dataset-size", j.dataset_size, "samples in the synthetic dataset")
              ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  g_job->add_option("--features", j.features, "features per sample")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  g_job->add_option("--workers", j.workers, "loader worker threads per rank")->check(CLI::Range(0, 64));
  g_job->add_option("--prefetch", j.prefetch, "batches in flight per worker")->check(CLI::Range(1, 64));
  g_job->add_flag("--pageable", pageable, "stage batches in pageable instead of pinned memory");
  g_job->add_flag("--no-shuffle", no_shuffle, "sampler without shuffling");
  g_job->add_flag("--keep-last", keep_last, "sampler without drop_last (pads like DistributedSampler)");
  g_job->add_option("--model", j.model, "mlp (default), mlp-bn, cnn (images), or PATH.pt (a TorchScript module)")
              ->check([](const std::string& m) {
                if (m == "mlp" || m == "mlp-bn" || m == "cnn") return std::string();
                if (m.size() > 3 && m.compare(m.size() - 3, 3, ".pt") == 0) return std::string();
                return std::string("--model must be mlp, mlp-bn, cnn or a TorchScript file PATH.pt");
              });
  g_job->add_option("--hidden", j.hidden, "hidden width of the MLP")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  g_job->add_option("--loss-reduction", j.loss_reduction, "mean (default) or sum")
              ->check(CLI::IsMember({"mean", "sum"}));
  g_job->add_option("--lr", j.lr, "AdamW learning rate")->check(CLI::Range(0.0, 10.0));
  g_job->add_option("--batch-size", j.batch_size, "batch per rank")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  g_job->add_option("--epochs", j.epochs, "epochs")->check(CLI::Range(1, 100000));
  g_job->add_option("--max-steps", j.max_steps, "stop after this many optimizer steps (0: no limit)")
              ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  g_job->add_option("--accum-steps", j.accum_steps, "micro-steps per optimizer step (no_sync on all but the last)")
              ->check(CLI::Range(1, 255));
  g_job->add_flag("--sync-every-step", j.sync_every_step, "with --accum-steps: allreduce on every micro-step");
  g_job->add_option("--bucket-mb", j.bucket_mb, "gradient bucket size in MB (DDP's bucket_cap_mb)")
              ->check(CLI::Range(1e-6, 1e6));
  g_job->add_option("--amp", j.amp, "auto|fp16|bf16|off")->check(CLI::IsMember({"auto", "fp16", "bf16", "off"}));
  g_job->add_option("--seed", j.seed, "seed for data, weights and sampler");
  g_job->add_option("--nproc", j.nproc, "ranks to start")->check(CLI::Range(1, 64));
  g_job->add_option("--device", j.device, "auto|cpu|cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  g_job->add_option("--backend", j.backend, "auto|gloo|nccl")->check(CLI::IsMember({"auto", "gloo", "nccl"}));
  g_job->add_flag("--no-record", no_record, "run the identical job without recording");
  g_job->add_option("--cuda-trace", j.cuda_trace,
                    "on CUDA, what CUPTI records: api (GPU work and the API calls that launched it, linked; default), "
                    "gpu (GPU work only: less overhead), off (spans and NVTX ranges only)")
      ->check(CLI::IsMember({"api", "gpu", "off"}));
  g_job->add_flag("--no-pin", no_pin, "let every rank run on every core (by default each rank of a local launch gets its "
                                      "own share of the cores)");
  g_job->add_flag("--no-batch-sched", no_batch_sched,
                  "keep the normal scheduling policy (by default a Gloo rank's threads run SCHED_BATCH, so Gloo's event "
                  "loop does not preempt its worker mid-collective)");
  g_job->add_option("--comm-poll-us", j.comm_poll_us,
                    "before blocking on a Gloo collective, poll it for up to this many microseconds, yielding the core "
                    "(keeps an idle core from having to be woken by the peer's data; 0: block at once)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  g_job->add_option("--slow", slow, "rank=R,stage=S,ms=M: slow a stage down (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g_job->add_option("--inject-fault", fault, "rank=R,step=S,kind=throw|kill|hang|exit0");
  g_job->add_option("--hang-timeout", j.hang_timeout_s,
                    "seconds without progress before a rank counts as hung (default: max(10, 20x the median step "
                    "time); 60 before the first step)")
              ->check(CLI::Range(1.0, 86400.0));
  g_job->add_option("--resume-from", j.resume_from, "resume from a checkpoint folder (RUN/checkpoints/step<k>)");
  g_job->add_option("--verify-steps", j.verify_steps,
                            "log consumed samples and replica hashes; dump tensors of the first N steps (--check sets it)")
              ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  g_job->add_option("--plant", j.plant,
                    "plant a fault that a check must catch: broken-shard, no-set-epoch, skip-allreduce, ckpt-no-rng, ckpt-no-step")
      ->check(CLI::IsMember(kPlantableFaults))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g_job->add_option("--checkpoint-steps", ckpt, "optimizer steps after which to checkpoint, e.g. 0,5,10")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    r.exit_code = 0;
    r.message = app.help();
    return r;
  } catch (const CLI::ParseError& e) {
    r.exit_code = 2;
    r.message = std::string("ddp_profile: ") + e.what() + "\nRun with --help for usage.";
    return r;
  }
  if (record) c.mode = Mode::record;
  else if (check) c.mode = Mode::check;
  else if (worker) c.mode = Mode::worker;
  else if (app.count("--export")) c.mode = Mode::export_trace;
  else if (app.count("--summary")) c.mode = Mode::summary;
  else if (app.count("--analyze")) c.mode = Mode::analyze;
  else if (app.count("--diff")) c.mode = Mode::diff;

  j.record = !no_record;
  j.pin_cpus = !no_pin;
  j.batch_sched = !no_batch_sched;
  j.pinned = !pageable;
  j.shuffle = !no_shuffle;
  j.drop_last = !keep_last;
  std::string err;
  for (const auto& s : slow) {
    SlowSpec spec;
    if (!parse_slow_spec(s, spec, err)) {
      r.exit_code = 2;
      r.message = "ddp_profile: " + err;
      return r;
    }
    j.slow.push_back(spec);
  }
  if (!fault.empty() && !parse_fault_spec(fault, j.fault, err)) {
    r.exit_code = 2;
    r.message = "ddp_profile: " + err;
    return r;
  }
  for (const auto& s : ckpt) {
    int v = 0;
    if (!parse_int(s.c_str(), v) || v < 0) {
      r.exit_code = 2;
      r.message = "ddp_profile: --checkpoint-steps takes non-negative integers, got '" + s + "'";
      return r;
    }
    j.checkpoint_steps.push_back(v);
  }
  for (const auto& s : j.slow)
    if (s.rank >= j.nproc) {
      r.exit_code = 2;
      r.message = "ddp_profile: --slow names rank " + std::to_string(s.rank) + " but --nproc is " + std::to_string(j.nproc);
      return r;
    }
  if (j.fault.rank >= j.nproc) {
    r.exit_code = 2;
    r.message = "ddp_profile: --inject-fault names rank " + std::to_string(j.fault.rank) + " but --nproc is " +
                std::to_string(j.nproc);
    return r;
  }
  // CLI11's expected(2) still accepts one value: the arity is checked here, the one place.
  if (c.mode == Mode::diff && c.diff_dirs.size() != 2) {
    r.exit_code = 2;
    r.message = "ddp_profile: --diff takes two run folders: --diff DIR_A DIR_B";
    return r;
  }
    bool is_run = c.mode == Mode::record || c.mode == Mode::check || c.mode == Mode::worker;
  c.job_options_given = g_job->count_all() > 0;
  if (!is_run && c.job_options_given) {
    r.exit_code = 2;
    r.message = "ddp_profile: job options only apply to --record, --check and --worker";
    return r;
  }
  if (!c.checks.empty() && c.mode != Mode::check) {
    r.exit_code = 2;
    r.message = "ddp_profile: --checks only applies to --check";
    return r;
  }
  if (!c.inputs.empty()) c.input_dir = c.inputs.front();
  const bool offline = c.mode == Mode::export_trace || c.mode == Mode::summary || c.mode == Mode::analyze;
  if (!c.maps.empty() && !offline) {
    r.exit_code = 2;
    r.message = "ddp_profile: --map only applies to --export, --summary and --analyze";
    return r;
  }
  if (!cycles.empty() && !(offline || c.mode == Mode::diff)) {
    r.exit_code = 2;
    r.message = "ddp_profile: --cycle only applies to --export, --summary, --analyze and --diff";
    return r;
  }
  if (cycles.size() == 2 && c.mode != Mode::diff) {
    r.exit_code = 2;
    r.message = "ddp_profile: --cycle N M (two cycles) only applies to --diff";
    return r;
  }
  if (!cycles.empty()) {
    c.cycle = cycles.front();
    c.diff_cycle = cycles.back();
  }
  if (!steps.empty()) {
    if (!offline) {
      r.exit_code = 2;
      r.message = "ddp_profile: --steps only applies to --export, --summary and --analyze";
      return r;
    }
    if (!parse_step_window(steps, c.steps, err)) {
      r.exit_code = 2;
      r.message = "ddp_profile: " + err;
      return r;
    }
    if (c.export_format == "kineto") {
      r.exit_code = 2;
      r.message = "ddp_profile: --steps with --format kineto is not supported: export the run whole, or use the "
                  "Chrome format";
      return r;
    }
  }
  KinetoStageMap map;
  for (const auto& m : c.maps)
    if (!map.add_user_rule(m, err)) {
      r.exit_code = 2;
      r.message = "ddp_profile: " + err;
      return r;
    }
  if (!c.output_file.empty() && c.mode != Mode::export_trace) {
    r.exit_code = 2;
    r.message = "ddp_profile: -o/--output only applies to --export";
    return r;
  }
  if (format->count() && c.mode != Mode::export_trace) {
    r.exit_code = 2;
    r.message = "ddp_profile: --format only applies to --export";
    return r;
  }
  if (c.export_format == "kineto" && c.output_file.empty()) {
    r.exit_code = 2;
    r.message = "ddp_profile: --export RUN --format kineto needs -o DIR (the folder for the per-rank traces)";
    return r;
  }
  if (c.export_format == "kineto" && !c.maps.empty()) {
    r.exit_code = 2;
    r.message = "ddp_profile: --map names stages in PyTorch profiler traces read in; --format kineto writes one of "
                "our runs, whose stages are known";
    return r;
  }
  return r;
}

}  // namespace ddp
