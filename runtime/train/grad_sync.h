#pragma once
// Bucketed gradient allreduce that overlaps backward, as DDP's reducer does: parameters are assigned to buckets in
// reverse registration order (gradients become ready roughly in that order during backward); a post-hook on each
// parameter's gradient accumulator marks it ready, and a bucket whose gradients are all ready is averaged and
// allreduced immediately, while backward continues. A comm thread waits on the launched works in order and records
// one `allreduce` span per bucket, from launch to completion (seen by polling on NCCL, whose wait() does not block
// the host). On no_sync micro-steps the hooks do nothing.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "profiler/recorder.h"
#include "runtime/train/dist.h"

namespace torch::autograd {
struct Node;
}

namespace ddp {

class GradSync {
 public:
  // Launches one allreduce (sum) of the given tensors on every rank; the work's wait() may block until done (Gloo)
  // or only order the training stream after it (NCCL).
  using Allreduce = std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>;

  GradSync(std::vector<at::Tensor> params, Dist& dist, double bucket_mb);
  GradSync(std::vector<at::Tensor> params, Allreduce allreduce, int world, double bucket_mb);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Call before each backward: whether this micro-step's backward reduces gradients (false = no_sync).
  void begin_backward(bool sync, const prof::StepContext& ctx);
  // After a syncing backward: waits for every bucket (the caller's wait_comm) and writes the averaged gradients
  // back. Throws when a collective failed or a parameter never received a gradient.
  void finish();

  size_t bucket_count() const { return buckets_.size(); }
  std::vector<uint64_t> bucket_bytes() const;
  uint64_t allreduce_calls() const { return calls_.load(); }
  uint64_t bytes_reduced() const { return bytes_.load(); }

  void on_grad_ready(size_t param);  // called from the gradient accumulator hooks
  // Told (on the comm thread) which bucket's collective it now waits for, and -1 when it waits for none: the
  // heartbeat's bucket, which a hang report names ("rank 0 waits in allreduce (bucket 0, step 605)").
  void observe_waits(std::function<void(int bucket)> f);

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    at::Tensor flat;
    size_t pending = 0;
    uint64_t bytes = 0;
  };
  struct Launched {
    size_t bucket;
    c10::intrusive_ptr<c10d::Work> work;
    uint64_t t0;
    prof::StepContext ctx;
  };
  void launch(size_t b);
  void comm_loop();
  std::function<void(int)> on_wait_;  // set under mu_, read by the comm thread after it took work under mu_

  std::vector<at::Tensor> params_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: they hold our hooks
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  Allreduce allreduce_;
  int world_ = 1;
  bool sync_ = false;
  prof::StepContext ctx_;
  size_t launched_ = 0;
  std::atomic<uint64_t> calls_{0}, bytes_{0};

  std::thread comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Launched> queue_;
  size_t completed_ = 0;  // works whose wait() returned: their results are ordered before the training stream's next use
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ddp
