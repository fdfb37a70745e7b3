#include "runtime/worker.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "profiler/span.h"
#include "profiler/gpu_activity.h"
#include "runtime/amp.h"
#include "runtime/checkpoint.h"
#include "runtime/cuda_path.h"
#include "runtime/device_plan.h"
#include "runtime/loss_scaler.h"
#include "runtime/dataset.h"
#include "runtime/dist.h"
#include "runtime/grad_sync.h"
#include "runtime/launch_env.h"
#include "runtime/loader.h"
#include "runtime/manifest.h"
#include "runtime/model.h"
#include "runtime/permutation.h"
#include "runtime/progress.h"
#include "runtime/run_dir.h"
#include "runtime/sampler.h"
#include "runtime/torch_compat.h"
#include "runtime/verify_log.h"
#include "traces/chrome_export.h"
#include "traces/run_folder.h"

namespace ddp {
namespace {

ProgressWriter g_progress;
int g_rank = -1;

// SIGTERM/SIGINT (the supervisor ending the run, or a user's Ctrl-C) are taken by one thread with sigwait, so the
// trace is flushed with ordinary code rather than from inside a signal handler.
void start_signal_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread created after this
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    g_progress.set_state(RankState::terminated);
    prof::gpu_flush();
    prof::flush();
    std::fflush(stdout);
    ::_exit(128 + sig);
  }).detach();
}

[[noreturn]] void die(const std::string& what) {
  ProgressRecord* r = g_progress.record();
  std::string where = r ? "epoch " + std::to_string(r->epoch.load()) + " step " + std::to_string(r->step.load()) +
                              ", stage " +
                              (r->stage.load() >= 0 ? std::string(stage_name(static_cast<Stage>(r->stage.load())))
                                                    : std::string("startup"))
                        : std::string("startup");
  std::cerr << "ddp_profile: rank " << g_rank << " (" << host_name() << ") failed at " << where << ": " << what
            << std::endl;
  g_progress.fail(what);
  prof::gpu_flush();
  prof::flush();
  std::fflush(stdout);
  ::_exit(1);
}

void single_threaded_math() {
  at::set_num_threads(1);
  // Debian's LibTorch may sit on OpenBLAS, which keeps its own pool; pin it to one thread too.
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
}

void maybe_inject_fault(const JobConfig& job, int rank, int64_t step) {
  if (job.fault.rank != rank || job.fault.step != step) return;
  const std::string& k = job.fault.kind;
  std::cerr << "ddp_profile: rank " << rank << ": injecting fault '" << k << "' at step " << step << std::endl;
  if (k == "throw") throw std::runtime_error("injected fault (throw) at step " + std::to_string(step));
  if (k == "kill") ::raise(SIGKILL);
  if (k == "exit0") {
    prof::flush();
    std::fflush(stdout);
    ::_exit(0);
  }
  if (k == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

double median_ms(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::string error_text(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

struct RunSetup {
  LaunchEnv env;
  JobConfig job;
  std::string dir;
  at::Device device = at::kCPU;
  std::string backend;
  DevicePlan plan;
  cuda::DeviceInfo gpu;
  AmpChoice amp;
};

nlohmann::json versions_json() {
  nlohmann::json v = {{"ddp_profile", "0.1.0"}, {"libtorch", TORCH_VERSION}, {"compiler", compiler_version()}};
#if DDP_PROFILE_CUDA
  v["cuda_build"] = true;
#else
  v["cuda_build"] = false;
  v["cuda"] = nullptr;
  v["nccl"] = nullptr;
  v["cudnn"] = nullptr;
#endif
  return v;
}

// The training job, top to bottom. Returns normally on success; throws on any failure.
void train(const RunSetup& s, Dist& dist, const prof::ClockOffset& clock_start) {
  const JobConfig& job = s.job;
  const int rank = dist.rank(), world = dist.world();

  // --- data --------------------------------------------------------------------------------------------------
  std::string err;
  std::unique_ptr<Dataset> dataset = open_dataset(job, err);
  if (!dataset) throw std::runtime_error(err);
  const Dataset& data = *dataset;
  const std::vector<int64_t> sample_shape = data.sample_shape();

  // --- model, replicated: same seed everywhere, then rank 0's weights broadcast (as DDP does at construction) ----
  torch::manual_seed(job.seed);
  Model model(job, sample_shape);
  model.to(s.device);
  std::vector<at::Tensor> params = model.parameters();
  {
    torch::NoGradGuard ng;
    for (auto& p : params) dist.broadcast(p, 0);
    for (auto& b : model.buffers()) dist.broadcast(b, 0);
  }
  GradSync sync(params, dist, job.bucket_mb);
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(job.lr));
  ScalerState scaler;  // the loss scaler's state as checkpoints hold it (inactive without fp16 AMP)

  TrainPosition start;
  if (!job.resume_from.empty()) {
    start = load_checkpoint(job.resume_from, rank, world, model, opt, scaler);
    if (rank == 0)
      std::printf("resumed from %s: epoch %lld, step %lld, %lld batches into the epoch\n", job.resume_from.c_str(),
                  static_cast<long long>(start.epoch), static_cast<long long>(start.global_step),
                  static_cast<long long>(start.batches_in_epoch));
  }
  LossScalerOptions lso;
  lso.enabled = s.amp.scaler;
  LossScaler loss_scaler(lso);
  if (!job.resume_from.empty() && !loss_scaler.load({scaler.scale, scaler.growth_tracker, scaler.enabled}, err))
    throw std::runtime_error("checkpoint " + job.resume_from + ": loss scaler: " + err);
  VerifyLog verify;
  if (job.verify_steps > 0) {
    verify.open(s.dir, rank, job.verify_steps);
    verify.replica(start.global_step - 1, tensors_hash(params));
  }
  auto wants_checkpoint = [&](int64_t completed) {
    return std::find(job.checkpoint_steps.begin(), job.checkpoint_steps.end(), completed) != job.checkpoint_steps.end();
  };
  std::vector<std::string> ckpt_omit;
  if (job.planted("ckpt-no-rng")) ckpt_omit.push_back("rng");
  if (job.planted("ckpt-no-step")) ckpt_omit.push_back("optimizer.step");
  auto checkpoint = [&](const TrainPosition& pos) {
    g_progress.stage(Stage::checkpoint);
    prof::Span sp(Stage::checkpoint);
    const LossScalerState ls = loss_scaler.state();
    scaler = {ls.scale, ls.growth_tracker, ls.enabled};
    save_checkpoint(checkpoint_dir(s.dir, pos.global_step), rank, world, job.seed, model, opt, scaler, pos, ckpt_omit);
  };

  // --- loader -------------------------------------------------------------------------------------------------
  LoaderOptions lo;
  lo.workers = job.workers;
  lo.prefetch = job.prefetch;
  lo.batch_size = job.batch_size;
  lo.accum_steps = job.accum_steps;
  lo.slow_disk_read_ms = job.slow_ms(rank, Stage::disk_read);
  lo.slow_transform_ms = job.slow_ms(rank, Stage::transform);
  lo.slow_pin_ms = job.slow_ms(rank, Stage::pin);
  // Pinned staging (CUDA builds) makes the H2D copies real asynchronous DMA; --pageable stages in ordinary memory.
  Loader loader(data, lo, cuda::staging_allocator(s.device.is_cuda() && job.pinned));
  cuda::H2DCopier h2d(s.device, job.pinned);
  auto release_copied = [&](bool wait) {
    for (StagedBatch* done : h2d.finished(wait)) loader.release(done);
  };

  const double slow_h2d = job.slow_ms(rank, Stage::h2d), slow_fwd = job.slow_ms(rank, Stage::forward),
               slow_bwd = job.slow_ms(rank, Stage::backward), slow_opt = job.slow_ms(rank, Stage::optimizer);
  auto sleep_ms = [](double ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  };
  torch::nn::functional::CrossEntropyFuncOptions ce_opts;
  if (job.loss_reduction == "sum") ce_opts.reduction(torch::kSum);

  nlohmann::json batch_shapes;
  std::vector<double> step_ms;  // measured with or without recording: the overhead benchmark compares them
  int64_t global_step = start.global_step;
  bool stop = false;
  if (wants_checkpoint(global_step) && job.resume_from.empty()) checkpoint(start);
  for (int epoch = static_cast<int>(start.epoch); epoch < job.epochs && !stop; ++epoch) {
    // --- sampler: DistributedSampler.set_epoch(epoch) ---
    const int order_epoch = job.planted("no-set-epoch") ? 0 : epoch;
    std::vector<int64_t> order = epoch_order(data.samples(), job.seed, order_epoch, job.shuffle);
    const int shard_rank = job.planted("broken-shard") ? 0 : rank;
    std::vector<int64_t> mine = shard_indices(order, shard_rank, world, job.drop_last);
    auto batches = make_batches(mine, job.batch_size, job.drop_last);
    const int64_t steps = static_cast<int64_t>(batches.size()) / job.accum_steps;
    batches.resize(steps * job.accum_steps);  // a trailing partial accumulation window is not run
    // Resuming mid-epoch: the sampler's position says how many batches of this epoch are done.
    const int64_t skip = epoch == start.epoch ? start.batches_in_epoch : 0;
    if (skip % job.accum_steps != 0 || skip > static_cast<int64_t>(batches.size()))
      throw std::runtime_error("checkpoint position " + std::to_string(skip) + " does not fit this job's epoch");
    std::vector<int64_t> batch_ids;
    batches.erase(batches.begin(), batches.begin() + skip);
    loader.start_epoch(static_cast<uint16_t>(epoch), static_cast<uint32_t>(global_step), batches);

    const auto epoch_t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t loss_steps = 0;
    for (int64_t st = skip / job.accum_steps; st < steps; ++st, ++global_step) {
      if (job.max_steps && global_step >= job.max_steps) {
        stop = true;
        break;
      }
      g_progress.step(global_step, epoch);
      maybe_inject_fault(job, rank, global_step);
      const auto step_t0 = std::chrono::steady_clock::now();
      prof::Span step_span(Stage::step);
      const bool dump = verify.dumping(global_step);
      std::vector<std::pair<std::string, at::Tensor>> pre_params;
      std::vector<std::vector<std::pair<std::string, at::Tensor>>> acts;
      if (dump)
        for (const auto& [k, t] : model.named_parameters()) pre_params.emplace_back(k, t.detach().clone());
      // The loss stays on the device until the step's end: reading it per micro-step would make the host wait for the
      // GPU after every forward and stop it from queueing work ahead.
      at::Tensor step_loss_t;
      for (int micro = 0; micro < job.accum_steps; ++micro) {
        prof::StepContext ctx{static_cast<uint32_t>(global_step), static_cast<uint16_t>(epoch),
                              static_cast<uint8_t>(micro)};
        prof::set_context(ctx.epoch, ctx.step, ctx.micro);
        prof::gpu_mark_step(ctx);

        g_progress.stage(Stage::wait_data);
        StagedBatch* b;
        {
          prof::Span sp(Stage::wait_data);
          b = loader.next();
          if (b) sp.item(static_cast<uint32_t>(b->index));
        }
        if (!b) throw std::logic_error("loader ran out of batches inside an epoch");
        prof::record_counter(Counter::loader_queue_depth, static_cast<uint64_t>(loader.ready_batches()));
        verify.batch(epoch, global_step, micro, skip + b->index, b->indices);

        g_progress.stage(Stage::h2d);
        at::Tensor x, y;
        {
          prof::Span sp(Stage::h2d);
          // Staged batch -> tensors on the compute device: on a copy stream from pinned memory with CUDA, a host copy
          // on CPU builds. The staging slot goes back to the loader once the copy has read it.
          cuda::H2DCopier::Batch db = h2d.copy(b, sample_shape);
          x = db.x;
          y = db.y;
          sleep_ms(slow_h2d);
          sp.bytes(b->bytes);
          sp.item(static_cast<uint32_t>(b->index));
        }
        if (batch_shapes.is_null())
          batch_shapes = {{"x", {{"shape", x.sizes().vec()}, {"dtype", "float32"}}},
                          {"y", {{"shape", {y.size(0)}}, {"dtype", "int64"}}}};
        release_copied(false);

        g_progress.stage(Stage::forward);
        at::Tensor loss;
        {
          prof::Span sp(Stage::forward);
          sp.item(static_cast<uint32_t>(x.size(0)));
          if (dump) acts.emplace_back();
          cuda::Autocast autocast(s.amp.dtype, s.device.is_cuda());
          at::Tensor logits = model.forward(x, dump ? &acts.back() : nullptr);
          loss = torch::nn::functional::cross_entropy(logits, y, ce_opts);
          if (job.accum_steps > 1) loss = loss / job.accum_steps;
          sleep_ms(slow_fwd);
        }
        release_copied(true);
        const bool sync_now = (micro == job.accum_steps - 1 || job.sync_every_step) && !job.planted("skip-allreduce");
        g_progress.stage(Stage::backward);
        {
          prof::Span sp(Stage::backward);
          sp.item(static_cast<uint32_t>(x.size(0)));
          sync.begin_backward(sync_now, ctx);
          // A slow backward delays the moment gradients become ready, so the knob sleeps before the hooks fire.
          sleep_ms(slow_bwd);
          (loss_scaler.enabled() ? loss * loss_scaler.scale() : loss).backward();
        }
        if (sync_now) {
          g_progress.stage(Stage::wait_comm);
          prof::Span sp(Stage::wait_comm);
          sync.finish();
        }
        at::Tensor l = loss.detach().to(at::kDouble);
        step_loss_t = step_loss_t.defined() ? step_loss_t + l : l;
      }
      if (dump) {
        // The verify log holds true gradients: with loss scaling they are still multiplied by the scale here.
        NamedTensors grads;
        for (const auto& [k, t] : model.named_parameters())
          grads.emplace_back(k, loss_scaler.enabled() && t.grad().defined() ? t.grad() * loss_scaler.inv_scale()
                                                                             : t.grad());
        verify.dump_step(global_step, pre_params, acts, grads);
      }
      // A value the host needs from the device (on CUDA: the host waits here for the GPU work queued before it).
      auto read_back = [&](const at::Tensor& t) {
        if (!s.device.is_cuda()) return t.item<double>();
        g_progress.stage(Stage::wait_gpu);
        prof::Span sp(Stage::wait_gpu);
        return t.item<double>();
      };
      g_progress.stage(Stage::optimizer);
      bool take_step = true;
      if (loss_scaler.enabled()) {
        // GradScaler's step: unscale, look for inf/NaN, take the same skip-or-step decision on every rank.
        at::Tensor found_inf;
        {
          prof::Span sp(Stage::optimizer);
          found_inf = cuda::unscale_and_check(params, loss_scaler.inv_scale());
          std::vector<at::Tensor> flag{found_inf};
          dist.allreduce(flag)->wait();
        }
        take_step = loss_scaler.update(read_back(found_inf) > 0) == ScalerDecision::step;
        g_progress.stage(Stage::optimizer);
      }
      {
        prof::Span sp(Stage::optimizer);
        if (take_step) opt.step();
        opt.zero_grad();
        sleep_ms(slow_opt);
      }
      const double step_loss = read_back(step_loss_t);
      if (s.device.is_cuda()) cuda::record_memory_counters(s.device.index());
      step_span.end();
      step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_t0).count());
      if (verify.enabled()) verify.replica(global_step, tensors_hash(params));
      if (wants_checkpoint(global_step + 1))
        checkpoint({epoch, global_step + 1, (st + 1) * job.accum_steps});
      loss_sum += step_loss;
      ++loss_steps;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_t0).count();
    if (rank == 0 && loss_steps > 0)
      std::printf("epoch %d: avg loss %.4f over %lld steps, %.2f s\n", epoch, loss_sum / static_cast<double>(loss_steps),
                  static_cast<long long>(loss_steps), secs);
    std::fflush(stdout);
  }

  // --- wrap up: clock check, manifest ---------------------------------------------------------------------------
  g_progress.stage(Stage::checkpoint);
  // CUPTI hands over only finished work: let the last optimizer kernels finish before the final flush.
  if (s.device.is_cuda()) cuda::synchronize(s.device.index());
  const prof::CollectorStats gpu_stats = prof::gpu_stop();
  dist.barrier();
  prof::ClockOffset clock_end = dist.measure_clock_offset(16);
  prof::record_clock({clock_end.peer_minus_local_ns, clock_end.uncertainty_ns, prof::monotonic_ns(), 1,
                      clock_end.rounds});
  nlohmann::json mine = {{"rank", rank},
                         {"host", host_name()},
                         {"pid", ::getpid()},
                         {"device", s.device.str()},
                         {"batch", batch_shapes},
                         {"steps", global_step},
                         {"step_time_median_ms", median_ms(step_ms)},
                         {"param_bytes", [&] {
                            uint64_t b = 0;
                            for (const auto& p : params) b += p.numel() * p.element_size();
                            return b;
                          }()},
                         {"param_hash", tensors_hash(model.parameters())},
                         {"buffer_hash", tensors_hash(model.buffers())},
                         {"allreduce_calls", sync.allreduce_calls()},
                         {"allreduce_bytes", sync.bytes_reduced()},
                         {"cupti", {{"records", gpu_stats.records},
                                    {"kernels", gpu_stats.kernels},
                                    {"nccl_kernels", gpu_stats.nccl_kernels},
                                    {"memcpys", gpu_stats.memcpys},
                                    {"gpu_linked", gpu_stats.gpu_linked},
                                    {"source_dropped", gpu_stats.source_dropped},
                                    {"incomplete", gpu_stats.incomplete},
                                    {"memcpy_bytes_pinned", gpu_stats.memcpy_bytes_pinned},
                                    {"memcpy_bytes_pageable", gpu_stats.memcpy_bytes_pageable},
                                    {"memcpy_ns_pinned", gpu_stats.memcpy_ns_pinned},
                                    {"memcpy_ns_pageable", gpu_stats.memcpy_ns_pageable}}},
                         {"loss_scale", loss_scaler.scale()},
                         {"clock", {{"offset_ns_start", clock_start.peer_minus_local_ns},
                                    {"uncertainty_ns_start", clock_start.uncertainty_ns},
                                    {"offset_ns_end", clock_end.peer_minus_local_ns},
                                    {"uncertainty_ns_end", clock_end.uncertainty_ns}}}};
  auto all = dist.exchange("meta_end", mine.dump());
  if (rank == 0) {
    nlohmann::json m;
    std::ifstream in(s.dir + "/" + kManifestFile);
    m = nlohmann::json::parse(in, nullptr, false);
    if (m.is_discarded()) m = nlohmann::json::object();
    m["ranks"] = nlohmann::json::array();
    for (const auto& a : all) m["ranks"].push_back(nlohmann::json::parse(a));
    m["gradient_buckets"] = sync.bucket_bytes();
    m["param_bytes"] = m["ranks"][0]["param_bytes"];
    m["end_time"] = iso_time_now();
    m["status"] = "completed";
    if (!write_json_atomic(s.dir + "/" + kManifestFile, m, err)) throw std::runtime_error(err);
  }
}

}  // namespace

int run_worker(const Command& cmd) {
  RunSetup s;
  std::string err;
  if (!read_launch_env(s.env, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;
  }
  g_rank = s.env.rank;
  s.job = cmd.job;
  s.job.nproc = s.env.world;
  // Device and backend per rank: NCCL with a GPU each, Gloo with CUDA tensors when ranks share a GPU, Gloo on CPU.
  s.gpu = cuda::probe(0);
  DeviceRequest dr;
  dr.device = s.job.device;
  dr.backend = s.job.backend;
  dr.cuda_build = cuda::built_with_cuda();
  dr.visible_gpus = s.gpu.count;
  dr.no_gpu_reason = s.gpu.why_none;
  dr.local_rank = s.env.local_rank;
  // Without the launcher's word on ranks per host, assume they all share this one: the safe side for a GPU (NCCL
  // refuses two ranks on one device, Gloo with CUDA tensors works either way).
  dr.local_world = s.env.local_world > 0 ? s.env.local_world : s.env.world;
  if (!plan_device(dr, s.plan, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;
  }
  s.device = s.plan.cuda ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(s.plan.device_index)) : at::Device(at::kCPU);
  s.backend = s.plan.backend;
  if (s.plan.cuda) s.gpu = cuda::probe(s.plan.device_index);
  if (!choose_amp({s.job.amp, s.device.is_cuda(), s.gpu.bf16}, s.amp, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;
  }
  cuda::use_device(s.plan.device_index);
  start_signal_thread();
  single_threaded_math();
  try {
    // The rendezvous comes first: under an external launcher rank 0 chooses the run folder and tells the others.
    DistOptions dopt;
    dopt.rank = s.env.rank;
    dopt.world = s.env.world;
    dopt.master_addr = s.env.master_addr;
    dopt.master_port = s.env.master_port;
    dopt.backend = s.backend;
    dopt.cuda_device = s.plan.cuda ? s.plan.device_index : -1;
    Dist dist(dopt);
    if (s.env.rank == 0) dist.store_set("run_dir", absolute_path(cmd.out_dir.empty() ? default_run_dir() : cmd.out_dir));
    s.dir = dist.store_get("run_dir");
    if (!prepare_run_dir(s.dir, err)) throw std::runtime_error(err);
    if (!g_progress.open(progress_file(s.dir, s.env.rank), s.env.rank, err)) throw std::runtime_error(err);
    if (s.job.data_path.empty()) s.job.data_path = default_data_path(s.dir, s.job);
    if (s.env.rank == 0 && !ensure_dataset(s.job, err, false)) throw std::runtime_error(err);
    dist.barrier();  // the dataset exists before anyone opens it

    if (s.job.record) {
      prof::RecorderConfig rc;
      rc.path = s.dir + "/" + rank_trace_file(s.env.rank);
      rc.rank = static_cast<uint32_t>(s.env.rank);
      rc.world = static_cast<uint32_t>(s.env.world);
      if (!prof::start(rc, err)) throw std::runtime_error(err);
      prof::name_this_thread("main");
      prof::record_meta("host", host_name());
      prof::record_meta("launch", s.env.method);
      if (s.plan.cuda) {
        std::string why;
        if (!prof::gpu_start(prof::GpuRecordingOptions{}, why))
          std::cerr << "ddp_profile: rank " << s.env.rank << ": " << why << "\n";
      }
    }
    prof::ClockOffset clock = dist.measure_clock_offset(32);
    prof::record_clock({clock.peer_minus_local_ns, clock.uncertainty_ns, prof::monotonic_ns(), 0, clock.rounds});

    auto metas = dist.exchange("meta_start", nlohmann::json({{"host", host_name()}, {"pid", ::getpid()}}).dump());
    if (s.env.rank == 0) {
      nlohmann::json m = {{"tool", "ddp_profile"},
                          {"versions", versions_json()},
                          {"device", {{"type", s.device.is_cuda() ? "cuda" : "cpu"},
                                      {"name", s.device.is_cuda() ? s.gpu.name : cpu_model_name()},
                                      {"plan", s.plan.note},
                                      {"shared_gpu", s.plan.shared_gpu}}},
                          {"amp", {{"dtype", amp_dtype_name(s.amp.dtype)}, {"loss_scaler", s.amp.scaler},
                                   {"reason", s.amp.reason}}},
                          {"backend", s.backend},
                          {"world_size", s.env.world},
                          {"launch", {{"method", s.env.method}, {"master_addr", s.env.master_addr}}},
                          {"seeds", {{"data", s.job.seed}, {"weights", s.job.seed}, {"sampler", s.job.seed}}},
                          {"config", to_json(s.job)},
                          {"expected_batch", {{"x", {{"shape", {s.job.batch_size, s.job.features}}, {"dtype", "float32"}}},
                                              {"y", {{"shape", {s.job.batch_size}}, {"dtype", "int64"}}}}},
                          {"host", host_name()},
                          {"start_time", iso_time_now()},
                          {"status", "running"},
                          {"clock", {{"source", prof::ticks_are_tsc() ? "tsc->CLOCK_MONOTONIC" : "CLOCK_MONOTONIC"},
                                     {"sync", "ping-pong over the process group, min round trip"}}}};
      m["config"]["data_path"] = s.job.data_path;
      m["versions"]["cuda"] = cuda::versions(s.gpu);
      for (const auto& a : metas) m["rank_hosts"].push_back(nlohmann::json::parse(a));
      if (!write_json_atomic(s.dir + "/" + kManifestFile, m, err)) throw std::runtime_error(err);
    }
    g_progress.set_state(RankState::running);
    train(s, dist, clock);
    prof::RecorderStats st = prof::stop();
    if (st.dropped)
      std::cerr << "ddp_profile: rank " << s.env.rank << ": " << st.dropped << " events dropped (buffers full)\n";
    dist.barrier();  // every trace is closed
    if (s.env.rank == 0 && s.env.method != "supervisor" && s.job.record) {
      RunTrace run;
      ExportStats es;
      if (!load_run(s.dir, run, err) || !export_chrome(run, s.dir + "/" + kChromeTraceFile, es, err))
        std::cerr << "ddp_profile: export failed: " << err << "\n";
    }
    g_progress.set_state(RankState::done);
  } catch (const std::exception& e) {
    die(error_text(e));
  }
  std::fflush(stdout);
  // Skip static destructors of LibTorch/Gloo: the work is done and everything is on disk.
  ::_exit(0);
}

}  // namespace ddp
