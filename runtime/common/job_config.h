#pragma once
// The job: every option that changes what a run does. One struct, printed whole into the manifest, so two runs can be
// diffed one variable at a time.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/model/stages.h"

namespace ddp {

// --slow rank=R,stage=S,ms=M: sleep M ms inside stage S on rank R (to rehearse a slow loader, slow GPU, ...).
struct SlowSpec {
  int rank = 0;
  Stage stage = Stage::transform;
  double ms = 0;
};

// --plant NAME: deliberate faults that show a check biting (docs/checks.md).
inline const std::vector<std::string> kPlantableFaults = {"broken-shard", "no-set-epoch", "skip-allreduce",
                                                          "ckpt-no-rng",  "ckpt-no-step", "keep-graphs"};

// --inject-fault rank=R,step=S,kind=throw|kill|hang|exit0
struct FaultSpec {
  int rank = -1;  // -1: none
  int step = 0;
  std::string kind;
};

struct JobConfig {
  // data
  std::string dataset = "synthetic";
  std::string data_path;  // empty: <data cache>/synthetic-n<N>-f<F>-seed<S>.ddpd, generated on first use
  int64_t dataset_size = 10000;
  int64_t features = 128;
  int workers = 2;
  int prefetch = 2;  // batches in flight per worker
  bool pinned = true;
  bool shuffle = true;
  bool drop_last = true;
  // model and optimisation
  std::string model = "mlp";
  int64_t hidden = 512;
  int64_t classes = 2;
  std::string loss_reduction = "mean";
  double lr = 1e-3;
  int64_t batch_size = 64;  // per rank
  int epochs = 2;
  int64_t max_steps = 0;  // 0: no limit (optimizer steps)
  int accum_steps = 1;
  bool sync_every_step = false;  // accumulation without no_sync
  double bucket_mb = 25.0;
  std::string amp = "auto";  // auto (fp16 on CUDA, off on CPU), fp16, bf16, off
  uint64_t seed = 0;
  // distributed
  int nproc = 2;
  bool pin_cpus =
      true;  // a local launch gives each rank its own share of the cores (runtime/launch/environment/cpu_sets.h)
  bool batch_sched = true;  // a Gloo rank's threads run SCHED_BATCH (runtime/launch/environment/batch_scheduling.h)
  // Before blocking on a Gloo collective the training thread polls it this long, yielding the core (GradSync::
  // poll_before_blocking says why); 0 blocks at once.
  int64_t comm_poll_us = 500;
  std::string device = "auto";   // auto, cpu, cuda
  std::string backend = "auto";  // auto, gloo, nccl
  // recording
  bool record = true;
  // On CUDA, what CUPTI records (docs/gpu.md): "api" GPU work and the API calls that launched it, linked; "gpu" GPU
  // work only (less overhead, no launch links); "off" no CUPTI (spans and NVTX ranges only).
  std::string cuda_trace = "api";
  std::vector<SlowSpec> slow;
  FaultSpec fault;
  double hang_timeout_s = 0;  // 0: automatic (runtime/launch/heartbeat/progress.h, hang_timeout_s)
  std::vector<int64_t> checkpoint_steps;
  std::string resume_from;         // a checkpoint folder (DIR/checkpoints/step<k>)
  int64_t verify_steps = 0;        // > 0: log samples and replica hashes, dump tensors of the first N steps
  std::vector<std::string> plant;  // names from kPlantableFaults
  bool planted(const std::string& name) const {
    for (const auto& p : plant)
      if (p == name) return true;
    return false;
  }

  double slow_ms(int rank, Stage s) const {
    double t = 0;
    for (const auto& x : slow)
      if (x.rank == rank && x.stage == s) t += x.ms;
    return t;
  }
};

nlohmann::json to_json(const JobConfig& c);

}  // namespace ddp
