#include "runtime/train/worker.h"

#include <dlfcn.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "profiler/gpu_activity.h"
#include "profiler/span.h"
#include "runtime/common/host_info.h"
#include "runtime/common/json_file.h"
#include "runtime/common/manifest.h"
#include "runtime/common/run_folder_setup.h"
#include "runtime/common/sleep.h"
#include "runtime/data/dataset.h"
#include "runtime/data/dataset_cache.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/launch/environment/batch_scheduling.h"
#include "runtime/launch/environment/cpu_budget.h"
#include "runtime/launch/environment/cpu_sets.h"
#include "runtime/launch/environment/launch_env.h"
#include "runtime/launch/heartbeat/progress.h"
#include "runtime/train/amp.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/cuda_path.h"
#include "runtime/train/device_plan.h"
#include "runtime/train/dist.h"
#include "runtime/train/epoch_batches.h"
#include "runtime/train/grad_sync.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/train/model.h"
#include "runtime/train/torch_compat.h"
#include "runtime/train/verify_log.h"
#include "runtime/train/worker_exit.h"
#include "runtime/train/worker_manifest.h"
#include "runtime/train/worker_setup.h"
#include "traces/base/stats.h"
#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"

namespace ddp {
namespace {

// This rank's heartbeat and identity for its exit path (worker_exit.h).
ProgressWriter& g_progress = rank_progress();

void single_threaded_math() {
  at::set_num_threads(1);
  // Debian's LibTorch may sit on OpenBLAS, which keeps its own pool; pin it to one thread too.
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
}

std::string error_text(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

// One stage of the loop: the heartbeat names it (for the supervisor's hang and failure reports) and the trace times it.
class StageScope {
 public:
  explicit StageScope(Stage s) : span_((g_progress.stage(s), s)) {}
  prof::Span& span() { return span_; }

 private:
  prof::Span span_;
};

// Dropout modules off for one scope (when `off`), back on at its end.
class DropoutOff {
 public:
  DropoutOff(Model& m, bool off) : model_(off ? &m : nullptr) {
    if (model_) model_->set_dropout(false);
  }
  ~DropoutOff() {
    if (model_) model_->set_dropout(true);
  }
  DropoutOff(const DropoutOff&) = delete;
  DropoutOff& operator=(const DropoutOff&) = delete;

 private:
  Model* model_;
};

// --plant: the deliberate faults a --check rehearsal asks for, resolved once before the loop.
struct PlantedFaults {
  bool no_set_epoch, broken_shard, skip_allreduce, ckpt_no_rng, ckpt_no_step, keep_graphs;
  explicit PlantedFaults(const JobConfig& j)
      : no_set_epoch(j.planted("no-set-epoch")),
        broken_shard(j.planted("broken-shard")),
        skip_allreduce(j.planted("skip-allreduce")),
        ckpt_no_rng(j.planted("ckpt-no-rng")),
        ckpt_no_step(j.planted("ckpt-no-step")),
        keep_graphs(j.planted("keep-graphs")) {}
  std::vector<std::string> checkpoint_omissions() const {
    std::vector<std::string> omit;
    if (ckpt_no_rng) omit.push_back("rng");
    if (ckpt_no_step) omit.push_back("optimizer.step");
    return omit;
  }
};

// --slow on this rank's training thread (the loader's stages take theirs in LoaderOptions).
struct SlowStages {
  double h2d, forward, backward, optimizer;
  SlowStages(const JobConfig& j, int rank)
      : h2d(j.slow_ms(rank, Stage::h2d)),
        forward(j.slow_ms(rank, Stage::forward)),
        backward(j.slow_ms(rank, Stage::backward)),
        optimizer(j.slow_ms(rank, Stage::optimizer)) {}
};

// One rank's training job: everything it trains with, built once, and the loop, read top to bottom in run().
class Trainer {
 public:
  Trainer(const RunSetup& s, Dist& dist, const Dataset& data)
      : s_(s),
        job_(s.job),
        dist_(dist),
        data_(data),
        rank_(dist.rank()),
        world_(dist.world()),
        sample_shape_(data.sample_shape()),
        planted_(s.job),
        slow_(s.job, dist.rank()),
        model_(replicated_model(s, dist, sample_shape_)),
        params_(model_.parameters()),
        sync_(params_, dist, s.job.bucket_mb),
        opt_(params_, torch::optim::AdamWOptions(s.job.lr)),
        scaler_(scaler_options(s.amp)),
        // Pinned staging (CUDA builds) makes the H2D copies real asynchronous DMA; --pageable stages in ordinary
        // memory.
        loader_(data, loader_options(s.job, dist.rank()), cuda::staging_allocator(s.device.is_cuda() && s.job.pinned)),
        h2d_(s.device, s.job.pinned) {
    if (job_.loss_reduction == "sum") ce_.reduction(torch::kSum);
    sync_.observe_waits([](int bucket) { g_progress.bucket(bucket); });
    sync_.poll_before_blocking(std::chrono::microseconds(s.job.comm_poll_us));
    if (!job_.resume_from.empty()) resume();
    if (job_.verify_steps > 0) {
      verify_.open(s_.dir, rank_, job_.verify_steps);
      verify_.replica(start_.global_step - 1, tensors_hash(params_));
    }
  }

  void run() {
    int64_t global_step = start_.global_step;
    if (wants_checkpoint(global_step) && job_.resume_from.empty()) checkpoint(start_);
    for (int epoch = static_cast<int>(start_.epoch); epoch < job_.epochs; ++epoch)
      if (!run_epoch(epoch, global_step)) break;
    steps_done_ = global_step;
  }

  // This rank's entry in the manifest's "ranks".
  records::manifest_rank rank_manifest(const prof::CollectorStats& gpu, const prof::ClockOffset& clock_start,
                                       const prof::ClockOffset& clock_end) const {
    uint64_t param_bytes = 0;
    for (const auto& p : params_) param_bytes += p.numel() * p.element_size();
    records::manifest_rank r;
    r.rank = rank_;
    r.host = host_name();
    r.pid = ::getpid();
    r.device = s_.device.str();
    r.batch = first_batch_;
    r.steps = steps_done_;
    r.step_time_median_ms = median(step_ms_);
    r.step_time_mean_ms = mean(step_ms_);
    r.step_time_p90_ms = percentile(step_ms_, 0.9);
    r.step_time_first_ms = step_ms_.empty() ? 0.0 : step_ms_.front();  // with one-time costs (warm-up)
    r.param_bytes = param_bytes;
    r.param_hash = tensors_hash(model_.parameters());
    r.buffer_hash = tensors_hash(model_.buffers());
    r.allreduce_calls = sync_.allreduce_calls();
    r.allreduce_bytes = sync_.bytes_reduced();
    r.cupti = records::cupti_stats{static_cast<int64_t>(gpu.records),
                                   static_cast<int64_t>(gpu.kernels),
                                   static_cast<int64_t>(gpu.nccl_kernels),
                                   static_cast<int64_t>(gpu.memcpys),
                                   static_cast<int64_t>(gpu.gpu_linked),
                                   static_cast<int64_t>(gpu.source_dropped),
                                   static_cast<int64_t>(gpu.incomplete),
                                   gpu.memcpy_bytes_pinned,
                                   gpu.memcpy_bytes_pageable,
                                   gpu.memcpy_ns_pinned,
                                   gpu.memcpy_ns_pageable};
    r.loss_scale = scaler_.scale();
    r.clock = records::rank_clock{clock_start.peer_minus_local_ns, clock_start.uncertainty_ns,
                                  clock_end.peer_minus_local_ns, clock_end.uncertainty_ns};
    r.cpu = this_process_cpu_budget(at::get_num_threads(), job_.workers);
    return r;
  }
  std::vector<uint64_t> bucket_bytes() const { return sync_.bucket_bytes(); }

 private:
  void resume() {
    LossScalerState scaler;
    start_ = load_checkpoint(job_.resume_from, rank_, world_, model_, opt_, scaler);
    std::string err;
    if (!scaler_.load(scaler, err))
      throw std::runtime_error("checkpoint " + job_.resume_from + ": loss scaler: " + err);
    if (rank_ == 0)
      std::printf("resumed from %s: epoch %lld, step %lld, %lld batches into the epoch\n", job_.resume_from.c_str(),
                  static_cast<long long>(start_.epoch), static_cast<long long>(start_.global_step),
                  static_cast<long long>(start_.batches_in_epoch));
  }

  bool wants_checkpoint(int64_t completed_steps) const {
    const auto& k = job_.checkpoint_steps;
    return std::find(k.begin(), k.end(), completed_steps) != k.end();
  }

  void checkpoint(const TrainPosition& pos) {
    StageScope stage(Stage::checkpoint);
    save_checkpoint(checkpoint_dir(s_.dir, pos.global_step), rank_, world_, job_.seed, model_, opt_, scaler_.state(),
                    pos, planted_.checkpoint_omissions());
  }

  // One epoch from the sampler's position; false when --max-steps ended the run.
  bool run_epoch(int epoch, int64_t& global_step) {
    // DistributedSampler.set_epoch(epoch) and this rank's shard.
    auto batches = epoch_batches(data_.samples(), job_, planted_.no_set_epoch ? 0 : epoch,
                                 planted_.broken_shard ? 0 : rank_, world_);
    const int64_t steps = static_cast<int64_t>(batches.size()) / job_.accum_steps;
    // Resuming mid-epoch: the sampler's position says how many batches of this epoch are done.
    const int64_t skip = epoch == start_.epoch ? start_.batches_in_epoch : 0;
    if (skip % job_.accum_steps != 0 || skip > static_cast<int64_t>(batches.size()))
      throw std::runtime_error("checkpoint position " + std::to_string(skip) + " does not fit this job's epoch");
    batches.erase(batches.begin(), batches.begin() + skip);
    loader_.start_epoch(static_cast<uint16_t>(epoch), static_cast<uint32_t>(global_step), batches);

    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t loss_steps = 0;
    bool more = true;
    for (int64_t st = skip / job_.accum_steps; st < steps; ++st, ++global_step) {
      if (job_.max_steps && global_step >= job_.max_steps) {
        more = false;
        break;
      }
      loss_sum += run_step(epoch, global_step, skip);
      ++loss_steps;
      if (wants_checkpoint(global_step + 1)) checkpoint({epoch, global_step + 1, (st + 1) * job_.accum_steps});
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rank_ == 0 && loss_steps > 0)
      std::printf("epoch %d: avg loss %.4f over %lld steps, %.2f s\n", epoch,
                  loss_sum / static_cast<double>(loss_steps), static_cast<long long>(loss_steps), secs);
    std::fflush(stdout);
    return more;
  }

  // One optimizer step: accum_steps micro-steps (no_sync on all but the last), then the update. Returns the loss.
  double run_step(int epoch, int64_t step, int64_t skip) {
    g_progress.step(step, epoch);
    maybe_inject_fault(job_, rank_, step);
    const auto t0 = std::chrono::steady_clock::now();
    prof::Span step_span(Stage::step);
    const bool dump = verify_.dumping(step);
    // A verified step runs with dropout off: the numerics check's single-process reference cannot draw the ranks'
    // masks (numerics.reference says so in its summary). Other steps train as the model says.
    DropoutOff dropout_off(model_, dump);
    NamedTensors pre_params;
    std::vector<NamedTensors> acts;
    if (dump)
      for (const auto& [k, t] : model_.named_parameters()) pre_params.emplace_back(k, t.detach().clone());
    // The loss stays on the device until the step's end: reading it per micro-step would make the host wait for the
    // GPU after every forward and stop it from queueing work ahead.
    at::Tensor step_loss;
    for (int micro = 0; micro < job_.accum_steps; ++micro) {
      const prof::StepContext ctx{static_cast<uint32_t>(step), static_cast<uint16_t>(epoch),
                                  static_cast<uint8_t>(micro)};
      prof::set_context(ctx);
      prof::gpu_mark_step(ctx);

      StagedBatch* batch = next_batch();
      verify_.batch(epoch, step, micro, skip + batch->index, batch->indices);
      const cuda::H2DCopier::Batch b = to_device(batch);
      release_copied(false);
      at::Tensor loss = forward(b, dump ? &acts.emplace_back() : nullptr);
      release_copied(true);
      const bool sync_now = (micro == job_.accum_steps - 1 || job_.sync_every_step) && !planted_.skip_allreduce;
      backward(loss, b.x.size(0), sync_now, ctx);
      if (sync_now) {
        StageScope stage(Stage::wait_comm);
        sync_.finish();
      }
      // The leak memory.steady must find: an output kept with its graph (every layer's saved activations).
      if (planted_.keep_graphs) kept_graphs_.push_back(model_.forward(b.x, nullptr));
      at::Tensor l = loss.detach().to(at::kDouble);
      step_loss = step_loss.defined() ? step_loss + l : l;
    }
    if (dump) verify_.dump_step(step, pre_params, acts, true_gradients());
    optimizer_step();
    const double loss = read_back(step_loss);
    if (s_.device.is_cuda()) cuda::record_memory_counters(s_.device.index());
    step_span.end();
    const auto took = std::chrono::steady_clock::now() - t0;
    step_ms_.push_back(std::chrono::duration<double, std::milli>(took).count());
    g_progress.step_time(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
    if (verify_.enabled()) {
      verify_.replica(step, tensors_hash(params_));
      verify_.memory(step, s_.device);
    }
    return loss;
  }

  StagedBatch* next_batch() {
    StageScope stage(Stage::wait_data);
    StagedBatch* b = loader_.next();
    if (!b) throw std::logic_error("loader ran out of batches inside an epoch");
    stage.span().item(static_cast<uint32_t>(b->index));
    prof::record_counter(Counter::loader_queue_depth, static_cast<uint64_t>(loader_.ready_batches()));
    return b;
  }

  // Staged batch -> tensors on the compute device: on a copy stream from pinned memory with CUDA, a host copy on CPU
  // builds. The staging slot goes back to the loader once the copy has read it (release_copied).
  cuda::H2DCopier::Batch to_device(StagedBatch* b) {
    StageScope stage(Stage::h2d);
    cuda::H2DCopier::Batch db = h2d_.copy(b, sample_shape_);
    sleep_ms(slow_.h2d);
    stage.span().bytes(b->bytes);
    stage.span().item(static_cast<uint32_t>(b->index));
    if (!first_batch_) first_batch_ = batch_spec(db.x.sizes().vec(), db.y.size(0));
    return db;
  }

  void release_copied(bool wait) {
    for (StagedBatch* done : h2d_.finished(wait)) loader_.release(done);
  }

  at::Tensor forward(const cuda::H2DCopier::Batch& b, NamedTensors* acts) {
    StageScope stage(Stage::forward);
    stage.span().item(static_cast<uint32_t>(b.x.size(0)));
    cuda::Autocast autocast(s_.amp.dtype, s_.device.is_cuda());
    at::Tensor loss = torch::nn::functional::cross_entropy(model_.forward(b.x, acts), b.y, ce_);
    if (job_.accum_steps > 1) loss = loss / job_.accum_steps;
    sleep_ms(slow_.forward);
    return loss;
  }

  void backward(const at::Tensor& loss, int64_t samples, bool sync_now, const prof::StepContext& ctx) {
    StageScope stage(Stage::backward);
    stage.span().item(static_cast<uint32_t>(samples));
    sync_.begin_backward(sync_now, ctx);
    // A slow backward delays the moment gradients become ready, so the knob sleeps before the hooks fire.
    sleep_ms(slow_.backward);
    (scaler_.enabled() ? loss * scaler_.scale() : loss).backward();
  }

  // The verify log holds true gradients: with loss scaling they are still multiplied by the scale here.
  NamedTensors true_gradients() const {
    NamedTensors grads;
    for (const auto& [k, t] : model_.named_parameters())
      grads.emplace_back(k, scaler_.enabled() && t.grad().defined() ? t.grad() * scaler_.inv_scale() : t.grad());
    return grads;
  }

  // AdamW's step, gated by the loss scaler as GradScaler does: unscale, look for inf/NaN on every rank, and take the
  // same skip-or-step decision everywhere.
  void optimizer_step() {
    bool take_step = true;
    if (scaler_.enabled()) {
      at::Tensor found_inf;
      {
        StageScope stage(Stage::optimizer);
        found_inf = cuda::unscale_and_check(params_, scaler_.inv_scale());
        std::vector<at::Tensor> flag{found_inf};
        dist_.allreduce(flag)->wait();
      }
      take_step = scaler_.update(read_back(found_inf) > 0) == ScalerDecision::step;
    }
    StageScope stage(Stage::optimizer);
    if (take_step) opt_.step();
    sync_.zero_grad();  // the gradients are views of the allreduce buckets: zeroed there, in place
    sleep_ms(slow_.optimizer);
  }

  // A value the host needs from the device (on CUDA: the host waits here for the GPU work queued before it).
  double read_back(const at::Tensor& t) {
    if (!s_.device.is_cuda()) return t.item<double>();
    StageScope stage(Stage::wait_gpu);
    return t.item<double>();
  }

  const RunSetup& s_;
  const JobConfig& job_;
  Dist& dist_;
  const Dataset& data_;
  const int rank_, world_;
  const std::vector<int64_t> sample_shape_;
  const PlantedFaults planted_;
  std::vector<at::Tensor> kept_graphs_;  // --plant keep-graphs: an output per micro-step, its graph alive
  const SlowStages slow_;
  Model model_;
  std::vector<at::Tensor> params_;
  GradSync sync_;
  torch::optim::AdamW opt_;
  LossScaler scaler_;
  Loader loader_;
  cuda::H2DCopier h2d_;
  torch::nn::functional::CrossEntropyFuncOptions ce_;
  VerifyLog verify_;
  TrainPosition start_;
  std::optional<records::batch_spec> first_batch_;  // the first batch's shapes as the model saw them (manifest)
  std::vector<double> step_ms_;  // measured with or without recording: the overhead benchmark compares them
  int64_t steps_done_ = 0;
};

// After the last step: the clock check, then this rank's facts into the manifest (rank 0 completes `manifest`, the
// one it wrote at the start).
void finish_run(const RunSetup& s, Dist& dist, const Trainer& trainer, const prof::ClockOffset& clock_start,
                std::optional<Manifest> manifest) {
  g_progress.stage(Stage::checkpoint);
  // CUPTI hands over only finished work: let the last optimizer kernels finish before the final flush.
  if (s.device.is_cuda()) cuda::synchronize(s.device.index());
  const prof::CollectorStats gpu_stats = prof::gpu_stop();
  dist.barrier();
  prof::ClockOffset clock_end = dist.measure_clock_offset(16);
  prof::record_clock(
      {clock_end.peer_minus_local_ns, clock_end.uncertainty_ns, prof::monotonic_ns(), 1, clock_end.rounds});
  const records::manifest_rank entry = trainer.rank_manifest(gpu_stats, clock_start, clock_end);
  auto all = dist.exchange("meta_end", records::to_json(entry).dump());
  if (manifest) write_end_manifest(s, std::move(*manifest), all, trainer.bucket_bytes());
}

// A restarted worker group (torchrun --max-restarts, TORCHELASTIC_RESTART_COUNT > 0) continues from the run's latest
// complete checkpoint; rank 0 picks it so that every rank resumes from the same step. "" when there is none.
std::string restart_point(const RunSetup& s, Dist& dist) {
  if (s.env.rank == 0) {
    const std::string ckpt = latest_complete_checkpoint(s.dir, s.env.world);
    std::printf(
        "restart %d of the worker group: %s\n", s.env.restart_count,
        ckpt.empty() ? "no complete checkpoint in the run folder, starting over" : ("resuming from " + ckpt).c_str());
    std::fflush(stdout);
    dist.store_set("restart_from", ckpt);
  }
  return dist.store_get("restart_from");
}

}  // namespace

int run_worker(const Command& cmd) {
  RunSetup s;
  std::string err;
  if (!read_launch_env(s.env, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 2;
  }
  rank_exit_identity() = {s.env.rank, s.env.restart_count, s.env.error_file};
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
  s.device =
      s.plan.cuda ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(s.plan.device_index)) : at::Device(at::kCPU);
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
    dopt.agent_store = s.env.agent_store;
    dopt.attempt = s.env.restart_count;
    dopt.gloo_batch_sched = s.job.batch_sched;
    // Without our supervisor (srun, torchrun, hosts of their own) nothing watches the heartbeat: the collectives'
    // own timeout is then what ends a rank whose peer is gone, so --hang-timeout sets it when given.
    if (s.job.hang_timeout_s > 0 && s.env.method != "supervisor")
      dopt.timeout = std::chrono::milliseconds(static_cast<int64_t>(s.job.hang_timeout_s * 1000));
    Dist dist(dopt);
    if (s.env.rank == 0) dist.store_set("run_dir", record_run_folder(cmd.out_dir));
    s.dir = dist.store_get("run_dir");
    if (!prepare_run_folder(s.dir, err)) throw std::runtime_error(err);
    if (s.env.rank == 0 && s.env.method != "supervisor") set_status_dir(s.dir);
    if (s.env.restart_count > 0 && s.job.resume_from.empty()) s.job.resume_from = restart_point(s, dist);
    if (!g_progress.open(progress_file(s.dir, s.env.rank), s.env.rank, err)) throw std::runtime_error(err);
    const DatasetPath where = dataset_path_source(s.job);
    if (s.job.data_path.empty()) s.job.data_path = default_data_path(s.dir, s.job);
    if (s.env.rank == 0 && !ensure_dataset(s.job, where, err, false)) throw std::runtime_error(err);
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
      if (s.plan.cuda && s.job.cuda_trace != "off") {
        std::string why;
        prof::GpuRecordingOptions gpu;
        gpu.api = s.job.cuda_trace == "api";
        if (!prof::gpu_start(gpu, why)) std::cerr << "ddp_profile: rank " << s.env.rank << ": " << why << "\n";
      }
    }
    prof::ClockOffset clock = dist.measure_clock_offset(32);
    prof::record_clock({clock.peer_minus_local_ns, clock.uncertainty_ns, prof::monotonic_ns(), 0, clock.rounds});

    std::unique_ptr<Dataset> dataset = open_dataset(s.job, err);
    if (!dataset) throw std::runtime_error(err);
    fit_job_to_dataset(s.job, *dataset);
    auto hosts = dist.exchange("meta_start", records::to_json(this_rank_host()).dump());
    std::optional<Manifest> manifest;  // rank 0's, completed at the end
    if (s.env.rank == 0) manifest = write_start_manifest(s, dataset->sample_shape(), hosts);
    g_progress.set_state(RankState::running);
    {
      Trainer trainer(s, dist, *dataset);
      trainer.run();
      finish_run(s, dist, trainer, clock, std::move(manifest));
    }
    prof::RecorderStats st = prof::stop();
    if (st.dropped)
      std::cerr << "ddp_profile: rank " << s.env.rank << ": " << st.dropped << " events dropped (buffers full)\n";
    dist.barrier();  // every trace is closed
    if (s.env.rank == 0 && s.env.method != "supervisor" && s.job.record) {
      RunTrace run;
      ExportStats es;
      if (!load_run(s.dir, run, err) || !export_chrome(run, s.dir + "/" + kChromeTraceFile, es, err))
        std::cerr << "ddp_profile: export failed: " << err << "\n";
      for (const auto& p : run.problems) std::cerr << "ddp_profile: warning: " << p << "\n";
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
