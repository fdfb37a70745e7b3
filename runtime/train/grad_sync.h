#pragma once
// Bucketed gradient allreduce that overlaps backward, as DDP's reducer does: parameters are assigned to buckets in
// reverse registration order (gradients become ready roughly in that order during backward); a post-hook on each
// parameter's gradient accumulator marks it ready, and a bucket whose gradients are all ready is averaged and
// allreduced immediately, while backward continues. On no_sync micro-steps the hooks do nothing.
//
// The gradients live in the buckets (DDP's gradient_as_bucket_view): each parameter's .grad is a view of its bucket's
// flat tensor, so backward accumulates straight into what is reduced, in place, and nothing is copied in or out.
// zero_grad() zeroes the buckets (an optimizer's own zero_grad may drop the views; a gradient that is not a view at
// launch is copied in and back, so correctness never depends on it). finish() waits on the works itself; a comm thread
// also waits on them, in order, to record one `allreduce` span per bucket from launch to completion (the first of the
// two to see a collective complete stamps its end; NCCL's wait() does not block the host, so there completion is seen
// by polling).
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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
  // blocking_waits: the works' wait() returns only when the collective is done (Gloo). Then, when nothing is being
  // recorded, finish()'s own wait is all that is needed and the comm thread is not woken at all.
  GradSync(std::vector<at::Tensor> params, Allreduce allreduce, int world, double bucket_mb,
           bool blocking_waits = false);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Call before each backward: whether this micro-step's backward reduces gradients (false = no_sync).
  void begin_backward(bool sync, const prof::StepContext& ctx);
  // After a syncing backward: waits for every bucket (the caller's wait_comm) and writes the averaged gradients
  // back. Throws when a collective failed or a parameter never received a gradient.
  void finish();
  // Zeroes every gradient (the buckets), keeping .grad a view of them: call instead of the optimizer's zero_grad.
  void zero_grad();

  size_t bucket_count() const { return buckets_.size(); }
  std::vector<uint64_t> bucket_bytes() const;
  uint64_t allreduce_calls() const { return calls_.load(); }
  uint64_t bytes_reduced() const { return bytes_.load(); }

  void on_grad_ready(size_t param);  // called from the gradient accumulator hooks
  // Told (on the comm thread) which bucket's collective it now waits for, and -1 when it waits for none: the
  // heartbeat's bucket, which a hang report names ("rank 0 waits in allreduce (bucket 0, step 605)").
  void observe_waits(std::function<void(int bucket)> f);
  // With blocking waits (Gloo), finish() first polls each collective for up to `budget`, yielding the core between
  // polls, and only then blocks in wait(). Blocked, both of a rank's threads sleep and its core goes idle; on a VM the
  // peer's data then has to wake an idle vCPU, which took ~80 us of the default job's ~160 us allreduce whenever the
  // ranks arrived more than ~10 us apart (docs/benchmarks.md). A yield gives the core to any runnable thread, Gloo's
  // included, so polling only spends time nothing else wants. Zero (the default here) blocks at once.
  void poll_before_blocking(std::chrono::microseconds budget) { poll_budget_ = budget; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    at::Tensor flat;
    size_t pending = 0;
    uint64_t bytes = 0;
  };
  // When a collective was seen complete (ticks; 0 until then): by the comm thread or by finish(), whichever first.
  using CompletionStamp = std::shared_ptr<std::atomic<uint64_t>>;
  struct Launched {
    size_t bucket;
    c10::intrusive_ptr<c10d::Work> work;
    uint64_t t0;
    prof::StepContext ctx;
    CompletionStamp t1;
  };
  void launch(size_t b);
  void comm_loop();
  void ensure_comm_thread();  // started on first need: NCCL polling, or recording a work that has no future
  at::Tensor grad_view(size_t param) const;  // the parameter's slice of its bucket, shaped like the parameter
  bool grad_is_view(size_t param) const;
  bool view_fits(size_t param) const;  // same dtype and device as its bucket
  std::function<void(int)> on_wait_;   // set under mu_, read by the comm thread after it took work under mu_

  std::vector<at::Tensor> params_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: they hold our hooks
  std::vector<size_t> bucket_of_;
  std::vector<char> copied_in_;  // per parameter: its gradient was not a bucket view at launch (copied back at finish)
  struct StepWork {
    c10::intrusive_ptr<c10d::Work> work;
    CompletionStamp t1;
    size_t bucket;
  };
  std::vector<StepWork> step_works_;  // launched this backward, in launch order
  bool record_at_completion(const StepWork& w, uint64_t t0);
  std::vector<Bucket> buckets_;
  Allreduce allreduce_;
  int world_ = 1;
  std::chrono::microseconds poll_budget_{0};
  bool blocking_waits_ = false;
  bool sync_ = false;
  prof::StepContext ctx_;
  size_t launched_ = 0;
  std::atomic<uint64_t> calls_{0}, bytes_{0};

  std::thread comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Launched> queue_;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ddp
