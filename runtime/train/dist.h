#pragma once
// The process group of one rank: a key-value store rendezvous at MASTER_ADDR:MASTER_PORT (runtime/launch/
// rendezvous_store.h: rank 0 serves it on that one address, or under torchrun every rank is a client of the agent's
// store), Gloo on CPU, NCCL on GPU, plus
// the small collectives the runtime needs around training (barrier, broadcast, clock ping-pong, string exchange).
// Control traffic always goes over Gloo on CPU tensors: NCCL takes CUDA tensors only, and its wait() does not block
// the host, so neither a barrier nor a clock ping-pong could be timed through it.
#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/version.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "profiler/clock_sync.h"

namespace c10d {
class Store;
class ProcessGroup;
class Backend;
class Work;
}  // namespace c10d

namespace ddp {
class StoreServer;

struct DistOptions {
  int rank = 0;
  int world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string backend = "gloo";  // gloo | nccl
  int cuda_device = -1;          // the rank's GPU (NCCL binds its communicator to it)
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // torchrun's agent already serves the store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE): rank 0 connects too.
  bool agent_store = false;
  // The launcher's attempt (TORCHELASTIC_RESTART_COUNT): its keys are kept apart from an earlier attempt's, which
  // stay in a store that outlives the worker group.
  int attempt = 0;
  // Gloo's threads under SCHED_BATCH (runtime/launch/environment/batch_scheduling.h); JobConfig::batch_sched, on by
  // default.
  bool gloo_batch_sched = false;
};

class Dist {
 public:
  explicit Dist(const DistOptions& opt);
  ~Dist();
  int rank() const { return opt_.rank; }
  int world() const { return opt_.world; }
  const std::string& backend() const { return opt_.backend; }

  // Gradient traffic on the training backend (tensors on the training device).
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors);
  // Blocks the host until every rank arrived (over the CPU control group).
  void barrier();
  // CPU tensors go over the control group, device tensors over the training backend.
  void broadcast(at::Tensor& t, int root);
  // Every rank contributes a string; every rank gets all of them (through the store).
  std::vector<std::string> exchange(const std::string& key, const std::string& mine);
  void store_set(const std::string& key, const std::string& value);
  std::string store_get(const std::string& key);
  // Measures each rank's clock offset to rank 0 by ping-pong over the process group. Returns this rank's estimate
  // (rank 0: zero offset, zero uncertainty).
  prof::ClockOffset measure_clock_offset(int rounds);

 private:
  DistOptions opt_;
  std::unique_ptr<StoreServer> server_;  // rank 0, unless the launcher serves the store
  c10::intrusive_ptr<c10d::Store> store_;
  // The concrete Gloo/NCCL group: a c10d::ProcessGroup in 1.13, a c10d::Backend from 2.0 on (same collectives).
#if TORCH_VERSION_MAJOR >= 2
  using Group = c10d::Backend;
#else
  using Group = c10d::ProcessGroup;
#endif
  c10::intrusive_ptr<Group> pg_;    // training backend: Gloo or NCCL
  c10::intrusive_ptr<Group> ctrl_;  // Gloo on CPU: pg_ itself when the backend is Gloo
};

}  // namespace ddp
