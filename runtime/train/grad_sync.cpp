#include "runtime/train/grad_sync.h"

#include <sched.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "profiler/span.h"
#include "runtime/train/cuda_path.h"

namespace ddp {
namespace {
struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(GradSync* s, size_t i) : sync(s), index(i) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    sync->on_grad_ready(index);
    return outputs;
  }
  GradSync* sync;
  size_t index;
};
}  // namespace

GradSync::GradSync(std::vector<at::Tensor> params, Dist& dist, double bucket_mb)
    : GradSync(
          std::move(params), [&dist](std::vector<at::Tensor>& v) { return dist.allreduce(v); }, dist.world(), bucket_mb,
          dist.backend() == "gloo") {}

GradSync::GradSync(std::vector<at::Tensor> params, Allreduce allreduce, int world, double bucket_mb,
                   bool blocking_waits)
    : params_(std::move(params)), allreduce_(std::move(allreduce)), world_(world), blocking_waits_(blocking_waits) {
  const uint64_t cap = static_cast<uint64_t>(bucket_mb * 1024 * 1024);
  bucket_of_.resize(params_.size());
  Bucket cur;
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    uint64_t bytes = static_cast<uint64_t>(p.numel()) * p.element_size();
    if (!cur.params.empty() && cur.bytes + bytes > cap) {
      buckets_.push_back(std::move(cur));
      cur = Bucket{};
    }
    cur.offsets.push_back(cur.params.empty() ? 0 : cur.offsets.back() + params_[cur.params.back()].numel());
    cur.params.push_back(k);
    cur.bytes += bytes;
    bucket_of_[k] = buckets_.size();
  }
  if (!cur.params.empty()) buckets_.push_back(std::move(cur));
  for (Bucket& b : buckets_) {
    int64_t n = b.offsets.back() + params_[b.params.back()].numel();
    b.flat = at::zeros({n}, params_[b.params.front()].options());
  }
  copied_in_.assign(params_.size(), 0);
  {
    torch::NoGradGuard ng;
    for (size_t k = 0; k < params_.size(); ++k)
      if (view_fits(k)) params_[k].mutable_grad() = grad_view(k);
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[k]);
    if (!acc) throw std::invalid_argument("GradSync: parameter " + std::to_string(k) + " does not require grad");
    acc->add_post_hook(std::make_unique<ReadyHook>(this, k));
    accumulators_.push_back(std::move(acc));
  }
}

void GradSync::ensure_comm_thread() {
  if (!comm_.joinable()) comm_ = std::thread(&GradSync::comm_loop, this);
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (comm_.joinable()) comm_.join();
}

at::Tensor GradSync::grad_view(size_t k) const {
  const Bucket& b = buckets_[bucket_of_[k]];
  size_t i = 0;
  while (b.params[i] != k) ++i;
  return b.flat.narrow(0, b.offsets[i], params_[k].numel()).view_as(params_[k]);
}

// A bucket takes its first parameter's dtype and device; a parameter of another (a TorchScript model may mix them)
// keeps a gradient of its own, copied in and back (launch/finish).
bool GradSync::view_fits(size_t k) const {
  const at::Tensor& flat = buckets_[bucket_of_[k]].flat;
  return params_[k].scalar_type() == flat.scalar_type() && params_[k].device() == flat.device();
}

bool GradSync::grad_is_view(size_t k) const {
  const at::Tensor& g = params_[k].grad();
  const Bucket& b = buckets_[bucket_of_[k]];
  size_t i = 0;
  while (b.params[i] != k) ++i;
  return g.defined() && g.data_ptr() == static_cast<char*>(b.flat.data_ptr()) + b.offsets[i] * b.flat.element_size();
}

void GradSync::zero_grad() {
  torch::NoGradGuard ng;
  for (Bucket& b : buckets_) b.flat.zero_();
  for (size_t k = 0; k < params_.size(); ++k) {
    if (grad_is_view(k)) continue;
    if (view_fits(k))
      params_[k].mutable_grad() = grad_view(k);
    else if (params_[k].grad().defined())
      params_[k].mutable_grad().zero_();
  }
}

std::vector<uint64_t> GradSync::bucket_bytes() const {
  std::vector<uint64_t> v;
  for (const auto& b : buckets_) v.push_back(b.bytes);
  return v;
}

void GradSync::begin_backward(bool sync, const prof::StepContext& ctx) {
  sync_ = sync;
  ctx_ = ctx;
  if (!sync) return;
  for (Bucket& b : buckets_) b.pending = b.params.size();
  launched_ = 0;
  step_works_.clear();
}

void GradSync::on_grad_ready(size_t param) {
  if (!sync_) return;  // no_sync: gradients only accumulate locally
  Bucket& b = buckets_[bucket_of_[param]];
  if (b.pending == 0) return;  // already launched (a parameter used twice in one graph)
  if (--b.pending == 0) launch(bucket_of_[param]);
}

void GradSync::launch(size_t bi) {
  Bucket& b = buckets_[bi];
  for (size_t i = 0; i < b.params.size(); ++i) {
    const size_t k = b.params[i];
    copied_in_[k] = !grad_is_view(k);
    if (copied_in_[k]) {
      const at::Tensor& g = params_[k].grad();
      b.flat.narrow(0, b.offsets[i], g.numel()).copy_(g.reshape({-1}));
    }
  }
  // Averaging as DDP does, before the sum. For a power-of-two world 1/world is exact, so multiplying by it rounds to
  // the same float as dividing, bit for bit, and costs a fraction of a vector division (~15 us of the default step).
  if ((world_ & (world_ - 1)) == 0)
    b.flat.mul_(1.0 / world_);
  else
    b.flat.div_(world_);
  std::vector<at::Tensor> v{b.flat};
  // The span starts where the collective does, as PyTorch's record_param_comms does: the averaging above (and any
  // copy in) is backward's work on this thread and stays in its span.
  const uint64_t t0 = prof::recording() ? prof::ticks() : 0;
  auto work = allreduce_(v);
  calls_.fetch_add(1);
  bytes_.fetch_add(b.bytes);
  ++launched_;
  CompletionStamp t1 = std::make_shared<std::atomic<uint64_t>>(0);
  step_works_.push_back({work, t1, bi});
  // Unrecorded and blocking: no span to stamp and no failure to poll for (finish()'s wait() raises it).
  if (!t0 && blocking_waits_) return;
  // Recorded on Gloo: the thread that completes the collective records its span; no thread of ours is woken for it.
  if (t0 && blocking_waits_ && record_at_completion(step_works_.back(), t0)) return;
  ensure_comm_thread();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({bi, std::move(work), t0, ctx_, std::move(t1)});
  }
  cv_.notify_all();
}

// Gloo completes a work on its worker thread, which runs the work's future callbacks before it wakes the waiters:
// the span recorded there ends at the true completion, and costs no wake-up of a thread of ours (on a 2-core machine a
// comm thread woken for every bucket slowed the recorded step by a third). A work without a future (a test's fake)
// goes to the comm thread instead. A callback that runs at once, on this thread, because the work was already done
// (a world of one), records here: its span then nests inside the backward that launched it.
bool GradSync::record_at_completion(const StepWork& w, uint64_t t0) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  try {
    future = w.work->getFuture();
  } catch (const std::exception&) {
    return false;
  }
  if (!future) return false;
  const uint64_t bytes = buckets_[w.bucket].bytes;
  const uint16_t bucket = static_cast<uint16_t>(w.bucket);
  const prof::StepContext ctx = ctx_;
  const CompletionStamp stamp = w.t1;
  const std::thread::id launcher = std::this_thread::get_id();
  future->addCallback([t0, bytes, bucket, ctx, stamp, launcher](c10::ivalue::Future&) {
    uint64_t t1 = prof::ticks(), unseen = 0;
    if (!stamp->compare_exchange_strong(unseen, t1)) t1 = unseen;
    if (std::this_thread::get_id() != launcher) prof::name_this_thread_once("comm");
    prof::record_span(Stage::allreduce, t0, t1, bytes, bucket, 0, &ctx);
  });
  return true;
}

void GradSync::comm_loop() {
  prof::name_this_thread("comm");
  // Queries on CUDA works need the rank's device current here: on a thread without one CUDA would make device 0's
  // context (hundreds of MB on another rank's GPU).
  if (!params_.empty() && params_.front().is_cuda()) cuda::use_device(params_.front().device().index());
  // wait() on a Gloo work returns when the collective is done. On NCCL it only makes the training stream wait for the
  // collective and returns at once: the span's end is then the moment a poll of isCompleted() sees it done, which
  // leaves the launches free-running. Polls back off from 20 to 200 µs while a collective is in flight.
  std::deque<Launched> in_flight;
  // The span ends at the first sighting of completion: this thread's, or finish()'s when it saw it first.
  auto record = [&](const Launched& l, uint64_t t1) {
    uint64_t first = 0;
    if (!l.t1->compare_exchange_strong(first, t1)) t1 = first;
    if (l.t0)
      prof::record_span(Stage::allreduce, l.t0, t1, buckets_[l.bucket].bytes, static_cast<uint16_t>(l.bucket), 0,
                        &l.ctx);
  };
  // A work reports completion also when it failed (NCCL): its exception ends the rank like a failed wait().
  auto done = [](const Launched& l) {
    if (!l.work->isCompleted()) return false;
    if (auto e = l.work->exception()) std::rethrow_exception(e);
    return true;
  };
  // Records, in launch order, the in-flight works that have completed.
  auto record_finished = [&] {
    while (!in_flight.empty() && done(in_flight.front())) {
      record(in_flight.front(), prof::ticks());
      in_flight.pop_front();
    }
  };
  auto poll = std::chrono::microseconds(20);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto work_to_do = [&] { return stop_ || !queue_.empty(); };
    if (in_flight.empty()) {
      cv_.wait(lock, work_to_do);
    } else {
      cv_.wait_for(lock, poll, work_to_do);
      poll = std::min(poll * 2, std::chrono::microseconds(200));
    }
    const bool stopping = stop_ && queue_.empty();
    std::deque<Launched> fresh;
    fresh.swap(queue_);
    const std::function<void(int)> on_wait = on_wait_;
    lock.unlock();
    try {
      for (Launched& l : fresh) {
        if (on_wait) on_wait(static_cast<int>(l.bucket));
        // On Gloo wait() is how this thread sees completion. On NCCL it would make this thread's stream (the
        // device's default one, which backward uses) wait for the collective: finish() orders the training stream
        // itself, so here completion is only polled.
        if (blocking_waits_) l.work->wait();
        const uint64_t t1 = l.t0 ? prof::ticks() : 0;
        if (in_flight.empty() && done(l))
          record(l, t1);  // in launch order: an earlier bucket still in flight is recorded first
        else
          in_flight.push_back(std::move(l));
        poll = std::chrono::microseconds(20);
      }
      if (on_wait && !fresh.empty()) on_wait(-1);
      record_finished();
      if (stopping) {
        // Shutting down after the last step: give the last collectives a moment to finish and be recorded.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!in_flight.empty() && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          record_finished();
        }
        return;
      }
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    lock.lock();
  }
}

void GradSync::observe_waits(std::function<void(int)> f) {
  std::lock_guard<std::mutex> lock(mu_);
  on_wait_ = std::move(f);
}

void GradSync::finish() {
  if (!sync_) return;
  if (launched_ != buckets_.size()) {
    std::string missing;
    for (size_t k = 0; k < params_.size(); ++k)
      if (buckets_[bucket_of_[k]].pending) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    throw std::runtime_error("gradient sync: parameters [" + missing +
                             "] received no gradient in this backward, so their buckets were never reduced");
  }
  std::function<void(int)> on_wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);  // a collective of an earlier step failed (seen by polling)
    on_wait = on_wait_;
  }
  // This thread waits on the works itself: on Gloo wait() returns when the collective is done (one wake-up, no
  // hand-off through the comm thread); on NCCL it orders this thread's stream after it and returns.
  for (auto& [work, t1, bucket] : step_works_) {
    if (on_wait) on_wait(static_cast<int>(bucket));  // the heartbeat names the bucket this rank waits for
    if (blocking_waits_ && poll_budget_.count() > 0) {
      const auto give_up = std::chrono::steady_clock::now() + poll_budget_;
      while (!work->isCompleted() && std::chrono::steady_clock::now() < give_up) ::sched_yield();
    }
    work->wait();
    uint64_t unseen = 0;
    if (prof::recording() && work->isCompleted()) t1->compare_exchange_strong(unseen, prof::ticks());
  }
  if (on_wait) on_wait(-1);
  for (Bucket& b : buckets_)
    for (size_t i = 0; i < b.params.size(); ++i)
      if (copied_in_[b.params[i]]) {
        at::Tensor g = params_[b.params[i]].mutable_grad();
        g.copy_(b.flat.narrow(0, b.offsets[i], g.numel()).view_as(g));
      }
  step_works_.clear();
  sync_ = false;
}

}  // namespace ddp
