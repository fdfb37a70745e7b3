#include "runtime/launch/cli/cli.h"

#include <map>
#include <sstream>

#include <CLI/CLI.hpp>

#include "ddp_profile_version.h"
#include "traces/base/parse_int.h"
#include "traces/kineto/kineto_map.h"
#include "traces/replay/what_if_edits.h"

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
  if (!parse_int(kv["rank"].c_str(), out.rank) || out.rank < 0 || !parse_int(kv["step"].c_str(), out.step) ||
      out.step < 0) {
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

namespace {

// What the option groups bind to beyond Command's own fields, resolved into the Command after the parse.
struct RawOptions {
  bool record = false, check = false, worker = false;
  std::vector<int> cycles;
  std::string steps;
  std::vector<std::string> slow, ckpt;
  std::string fault;
  std::vector<std::string> what_if;  // EDIT, then the run's inputs
  bool no_record = false, pageable = false, no_shuffle = false, keep_last = false, no_pin = false,
       no_batch_sched = false;
  CLI::Option* format = nullptr;
  CLI::Option_group* job_group = nullptr;
};

void add_mode_options(CLI::App& app, Command& c, RawOptions& raw) {
  auto* g_mode = app.add_option_group("Modes", "exactly one");
  g_mode->add_flag("--record", raw.record, "run the job and record it (supervisor: starts --nproc ranks)");
  g_mode->add_flag("--check", raw.check, "run the closed-loop checks -> DIR/checks.json");
  // Each takes one run folder, or PyTorch profiler (Kineto) traces: a folder of them or the files (docs/kineto.md).
  auto inputs = [&](const char* name, const char* help) {
    g_mode->add_option(name, c.inputs, help)
        ->expected(1, CLI::detail::expected_max_vector_size)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  inputs("--export",
         "rebuild DIR/trace.json (Chrome/Perfetto) from the native traces; or merge per-rank PyTorch "
         "profiler traces (TRACES..., with -o) into one aligned trace");
  inputs("--summary", "per-rank step count, step time, time per stage, bytes (DIR or TRACES...)");
  inputs("--analyze", "stalls with their cross-rank root causes (DIR or TRACES..., or a folder of digests)");
  inputs("--digest",
         "per-rank digests of PyTorch profiler traces into -o DIR, made where the traces lie (one call "
         "per node into one DIR), for --analyze DIR (docs/kineto.md, Digests)");
  g_mode->add_option("--diff", c.diff_dirs, "what changed between two runs")->expected(2);
  g_mode
      ->add_option("--what-if", raw.what_if,
                   std::string("EDIT RUN: the run replayed with EDIT (") + kEditForms +
                       "; comma-separated), the predicted step (docs/stalls.md, What if)")
      ->expected(2, CLI::detail::expected_max_vector_size)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g_mode->add_flag("--worker", raw.worker, "run as one rank (used by the supervisor and external launchers)");
  g_mode->require_option(1);
}

void add_output_options(CLI::App& app, Command& c, RawOptions& raw) {
  auto* g_out = app.add_option_group("Output");
  g_out->add_option("--out", c.out_dir, "run folder to write (default: runs/<timestamp>)");
  g_out->add_option("-o,--output", c.output_file,
                    "with --digest: the folder for the digests; with --what-if: the predicted run's folder; "
                    "with --export: the JSON file to write (default DIR/trace.json); with --format kineto: the folder; "
                    "with --format perfetto: the trace (default DIR/trace.pftrace), or FILE.tar: one per rank");
  raw.format = g_out
                   ->add_option("--format", c.export_format,
                                "with --export: chrome (one trace, default) or kineto (one of our runs as per-rank "
                                "PyTorch profiler traces in the folder -o DIR, for HTA) or perfetto (Perfetto's "
                                "protobuf format, docs/viewer.md)")
                   ->check(CLI::IsMember({"chrome", "kineto", "perfetto"}));
  g_out->add_flag("--json", c.json, "with --summary/--analyze/--digest/--what-if: print JSON");
  g_out
      ->add_option("--cycle", raw.cycles,
                   "with Kineto traces of several profiling cycles: only cycle N (1-based); "
                   "--diff A B --cycle N M compares A's cycle N with B's cycle M")
      ->expected(1, 2)
      ->check(CLI::PositiveNumber);
  g_out->add_option("--steps", raw.steps,
                    "with --export/--summary/--analyze/--what-if: only steps A-B (or one step A)");
  g_out
      ->add_option("--map", c.maps,
                   "with Kineto traces: REGEX=STAGE, events whose name matches are that stage "
                   "(repeatable; tried before the built-in names)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // Validated by the ladder (runtime/check/check_table.h owns the ids) before anything starts.
  g_out->add_option("--checks", c.checks, "with --check: run only these check ids (comma separated; docs/checks.md)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void add_job_options(CLI::App& app, JobConfig& j, RawOptions& raw) {
  raw.job_group = app.add_option_group("Job options");
  CLI::Option_group* g_job = raw.job_group;
  g_job
      ->add_option("--dataset", j.dataset,
                   "synthetic (default: 128-feature .ddpd file) or images[:DIR] (an image folder, generated "
                   "when DIR has no index.txt; decoded, randomly cropped and normalised on the workers; CNN)")
      ->check([](const std::string& d) {
        if (d == "synthetic" || d == "images" || (d.rfind("images:", 0) == 0 && d.size() > 7)) return std::string();
        return std::string("--dataset must be synthetic, images or images:DIR");
      });
  g_job->add_option("--data", j.data_path, "dataset file (.ddpd); generated when missing (synthetic)");
  g_job->add_option("--dataset-size", j.dataset_size, "samples in the synthetic dataset")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  g_job->add_option("--features", j.features, "features per sample")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  g_job->add_option("--workers", j.workers, "loader worker threads per rank")->check(CLI::Range(0, 64));
  g_job->add_option("--prefetch", j.prefetch, "batches in flight per worker")->check(CLI::Range(1, 64));
  g_job->add_flag("--pageable", raw.pageable, "stage batches in pageable instead of pinned memory");
  g_job->add_flag("--no-shuffle", raw.no_shuffle, "sampler without shuffling");
  g_job->add_flag("--keep-last", raw.keep_last, "sampler without drop_last (pads like DistributedSampler)");
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
  g_job->add_flag("--no-record", raw.no_record, "run the identical job without recording");
  g_job
      ->add_option("--cuda-trace", j.cuda_trace,
                   "on CUDA, what CUPTI records: api (GPU work and the API calls that launched it, linked; default), "
                   "gpu (GPU work only: less overhead), off (spans and NVTX ranges only)")
      ->check(CLI::IsMember({"api", "gpu", "off"}));
  g_job->add_flag("--no-pin", raw.no_pin,
                  "let every rank run on every core (by default each rank of a local launch gets its "
                  "own share of the cores)");
  g_job->add_flag(
      "--no-batch-sched", raw.no_batch_sched,
      "keep the normal scheduling policy (by default a Gloo rank's threads run SCHED_BATCH, so Gloo's event "
      "loop does not preempt its worker mid-collective)");
  g_job
      ->add_option("--comm-poll-us", j.comm_poll_us,
                   "before blocking on a Gloo collective, poll it for up to this many microseconds, yielding the core "
                   "(keeps an idle core from having to be woken by the peer's data; 0: block at once)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  g_job->add_option("--slow", raw.slow, "rank=R,stage=S,ms=M: slow a stage down (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g_job->add_option("--inject-fault", raw.fault, "rank=R,step=S,kind=throw|kill|hang|exit0");
  g_job
      ->add_option("--hang-timeout", j.hang_timeout_s,
                   "seconds without progress before a rank counts as hung (default: max(10, 20x the median step "
                   "time); 60 before the first step)")
      ->check(CLI::Range(1.0, 86400.0));
  g_job->add_option("--resume-from", j.resume_from, "resume from a checkpoint folder (RUN/checkpoints/step<k>)");
  g_job
      ->add_option("--verify-steps", j.verify_steps,
                   "log consumed samples and replica hashes; dump tensors of the first N steps (--check sets it)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  g_job
      ->add_option("--plant", j.plant,
                   "plant a fault that a check must catch: broken-shard, no-set-epoch, skip-allreduce, ckpt-no-rng, "
                   "ckpt-no-step, "
                   "keep-graphs")
      ->check(CLI::IsMember(kPlantableFaults))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g_job->add_option("--checkpoint-steps", raw.ckpt, "optimizer steps after which to checkpoint, e.g. 0,5,10")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// The job options' parsed values into the JobConfig; "" or the usage error.
std::string resolve_job(const RawOptions& raw, JobConfig& j) {
  j.record = !raw.no_record;
  j.pin_cpus = !raw.no_pin;
  j.batch_sched = !raw.no_batch_sched;
  j.pinned = !raw.pageable;
  j.shuffle = !raw.no_shuffle;
  j.drop_last = !raw.keep_last;
  std::string err;
  for (const auto& s : raw.slow) {
    SlowSpec spec;
    if (!parse_slow_spec(s, spec, err)) return err;
    j.slow.push_back(spec);
  }
  if (!raw.fault.empty() && !parse_fault_spec(raw.fault, j.fault, err)) return err;
  for (const auto& s : raw.ckpt) {
    int v = 0;
    if (!parse_int(s.c_str(), v) || v < 0) return "--checkpoint-steps takes non-negative integers, got '" + s + "'";
    j.checkpoint_steps.push_back(v);
  }
  for (const auto& s : j.slow)
    if (s.rank >= j.nproc)
      return "--slow names rank " + std::to_string(s.rank) + " but --nproc is " + std::to_string(j.nproc);
  if (j.fault.rank >= j.nproc)
    return "--inject-fault names rank " + std::to_string(j.fault.rank) + " but --nproc is " + std::to_string(j.nproc);
  return {};
}

// Which options go with which mode; fills the fields derived from them. "" or the usage error.
std::string check_mode_rules(const RawOptions& raw, Command& c) {
  // CLI11's expected(2) still accepts one value: the arity is checked here, the one place.
  if (c.mode == Mode::diff && c.diff_dirs.size() != 2) return "--diff takes two run folders: --diff DIR_A DIR_B";
  if (c.mode == Mode::what_if) {
    if (raw.what_if.size() < 2) return "--what-if takes the edit and the run: --what-if EDIT RUN";
    c.what_if = raw.what_if.front();
    c.inputs.assign(raw.what_if.begin() + 1, raw.what_if.end());
    std::string why;
    if (!parse_what_if(c.what_if, c.what_if_edits, why)) return why;
  }
  const bool is_run = c.mode == Mode::record || c.mode == Mode::check || c.mode == Mode::worker;
  c.job_options_given = raw.job_group->count_all() > 0;
  if (!is_run && c.job_options_given) return "job options only apply to --record, --check and --worker";
  if (!c.checks.empty() && c.mode != Mode::check) return "--checks only applies to --check";
  if (!c.inputs.empty()) c.input_dir = c.inputs.front();
  // CLI11 gives a mode that needs an input the next word even when it is an option ("--digest -o DIR" makes "-o"
  // and DIR the inputs): said here, not as "-o: no such file" or a missing -o.
  for (const std::string& in : c.inputs)
    if (in.size() > 1 && in[0] == '-')
      return "\"" + in + "\" is an option where the traces or folders go: give them first (--analyze TRACES... " +
             "[options]); a file whose name starts with '-' as ./" + in;
  const bool offline =
      c.mode == Mode::export_trace || c.mode == Mode::summary || c.mode == Mode::analyze || c.mode == Mode::what_if;
  if (!c.maps.empty() && !offline && c.mode != Mode::digest)
    return "--map only applies to --export, --summary, --analyze, --what-if and --digest";
  if (!raw.cycles.empty() && !(offline || c.mode == Mode::diff))
    return "--cycle only applies to --export, --summary, --analyze, --what-if and --diff";
  if (raw.cycles.size() == 2 && c.mode != Mode::diff) return "--cycle N M (two cycles) only applies to --diff";
  if (!raw.cycles.empty()) {
    c.cycle = raw.cycles.front();
    c.diff_cycle = raw.cycles.back();
  }
  std::string err;
  if (!raw.steps.empty()) {
    if (!offline) return "--steps only applies to --export, --summary, --analyze and --what-if";
    if (!parse_step_window(raw.steps, c.steps, err)) return err;
    if (c.export_format == "kineto")
      return "--steps with --format kineto is not supported: export the run whole, or use the Chrome format";
  }
  KinetoStageMap map;
  for (const auto& m : c.maps)
    if (!map.add_user_rule(m, err)) return err;
  if (!c.output_file.empty() && c.mode != Mode::export_trace && c.mode != Mode::digest && c.mode != Mode::what_if)
    return "-o/--output only applies to --export, --digest and --what-if";
  if (c.mode == Mode::digest && c.output_file.empty())
    return "--digest TRACES... needs -o DIR (the folder for the digests; several nodes may write into one)";
  if (raw.format->count() && c.mode != Mode::export_trace) return "--format only applies to --export";
  if (c.export_format == "kineto" && c.output_file.empty())
    return "--export RUN --format kineto needs -o DIR (the folder for the per-rank traces)";
  if (c.export_format == "kineto" && !c.maps.empty())
    return "--map names stages in PyTorch profiler traces read in; --format kineto writes one of our runs, whose "
           "stages are known";
  return {};
}

}  // namespace

ParseResult parse_command_line(int argc, const char* const* argv) {
  ParseResult r;
  Command& c = r.cmd;
  CLI::App app{
      "ddp_profile: run a two-rank data-parallel LibTorch job, record every stage of its data path, and prove it "
      "right.\nExit codes: 0 success, 1 a run, rank or check failed, 2 usage error.",
      "ddp_profile"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string("ddp_profile ") + kVersion);
  RawOptions raw;
  add_mode_options(app, c, raw);
  add_output_options(app, c, raw);
  add_job_options(app, c.job, raw);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    r.exit_code = 0;
    r.message = app.help();
    return r;
  } catch (const CLI::CallForVersion& e) {
    r.exit_code = 0;
    r.message = e.what();
    return r;
  } catch (const CLI::ParseError& e) {
    r.exit_code = 2;
    r.message = std::string("ddp_profile: ") + e.what() + "\nRun with --help for usage.";
    return r;
  }
  if (raw.record)
    c.mode = Mode::record;
  else if (raw.check)
    c.mode = Mode::check;
  else if (raw.worker)
    c.mode = Mode::worker;
  else if (app.count("--export"))
    c.mode = Mode::export_trace;
  else if (app.count("--summary"))
    c.mode = Mode::summary;
  else if (app.count("--analyze"))
    c.mode = Mode::analyze;
  else if (app.count("--digest"))
    c.mode = Mode::digest;
  else if (app.count("--diff"))
    c.mode = Mode::diff;
  else if (app.count("--what-if"))
    c.mode = Mode::what_if;
  std::string err = resolve_job(raw, c.job);
  if (err.empty()) err = check_mode_rules(raw, c);
  if (!err.empty()) {
    r.exit_code = 2;
    r.message = "ddp_profile: " + err;
  }
  return r;
}

}  // namespace ddp
