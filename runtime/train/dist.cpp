#include "runtime/train/dist.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#if DDP_PROFILE_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "profiler/clock.h"
#include "runtime/launch/environment/batch_scheduling.h"
#include "runtime/train/rendezvous_store.h"
#include "runtime/train/torch_compat.h"

namespace ddp {

namespace {
bool is_loopback(const std::string& addr) { return addr.rfind("127.", 0) == 0 || addr == "localhost" || addr == "::1"; }

// The address Gloo binds to on this host. A rendezvous on loopback means every rank is here: bind there too. Otherwise
// bind to this host's own address (GLOO_SOCKET_IFNAME names an interface), never to MASTER_ADDR, which only the
// master host has.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (is_loopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname(master_addr);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
// c10d's store interface (what Gloo and NCCL rendezvous through) over our client of the rendezvous store.
class ClientStore : public c10d::Store {
 public:
  ClientStore(const std::string& host, int port, std::chrono::milliseconds timeout)
      : c10d::Store(timeout), host_(host), port_(port), c_(std::make_unique<StoreClient>()) {
    std::string err;
    if (!c_->connect(host, port, timeout, err)) throw std::runtime_error(err);
  }
#if TORCH_VERSION_MAJOR >= 2
  // A second connection to the same store (torch >= 2 gives some users of a store their own).
  c10::intrusive_ptr<c10d::Store> clone() override { return c10::make_intrusive<ClientStore>(host_, port_, timeout_); }
#endif
  void set(const std::string& key, const std::vector<uint8_t>& value) override { c_->set(key, value); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return c_->compare_set(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override { return c_->get(key, timeout_); }
  int64_t add(const std::string& key, int64_t value) override { return c_->add(key, value); }
  bool deleteKey(const std::string& key) override { return c_->remove(key); }
  bool check(const std::vector<std::string>& keys) override { return c_->check(keys); }
  int64_t getNumKeys() override { return c_->num_keys(); }
  void wait(const std::vector<std::string>& keys) override { c_->wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    c_->wait(keys, timeout);
  }

 private:
  const std::string host_;
  const int port_;
  std::unique_ptr<StoreClient> c_;
};
}  // namespace

Dist::Dist(const DistOptions& opt) : opt_(opt) {
  std::string err;
  if (opt.rank == 0 && !opt.agent_store) {
    server_ = std::make_unique<StoreServer>();
    if (!server_->start(opt.master_addr, opt.master_port, err)) throw std::runtime_error(err);
  }
  store_ = c10::make_intrusive<c10d::PrefixStore>(
      "ddp_profile/attempt" + std::to_string(opt.attempt),
      c10::make_intrusive<ClientStore>(opt.master_addr, server_ ? server_->port() : opt.master_port, opt.timeout));
  auto gloo = [&](const std::string& prefix) {
    // Gloo's device loop and worker threads start in here and inherit the policy
    // (runtime/launch/environment/batch_scheduling.h).
    BatchSchedulingScope batch(opt.gloo_batch_sched);
    if (!batch.error().empty())
      std::fprintf(stderr, "ddp_profile: rank %d: %s; the normal policy stays\n", opt.rank, batch.error().c_str());
    auto go = c10d::ProcessGroupGloo::Options::create(opt.timeout);
    go->devices.push_back(gloo_device(opt.master_addr));
    // One worker thread: DDP runs one collective at a time, in order, and on small machines every idle thread is one
    // more to schedule; it is also the one "comm" lane the allreduce spans are recorded on (grad_sync.cpp).
    go->threads = 1;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, store_), opt.rank,
                                                       opt.world, go);
  };
  if (opt.backend == "gloo") {
    pg_ = gloo("pg");
    ctrl_ = pg_;
  }
#if DDP_PROFILE_CUDA
  else if (opt.backend == "nccl") {
    // A failed or timed-out collective surfaces as an exception on its work (error handling 2, "clean up only"),
    // which ends the rank through the same path as a Gloo failure, traces flushed; PyTorch's default (3) aborts the
    // process from the watchdog thread without that. A user's own setting wins.
    ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
    auto no = c10d::ProcessGroupNCCL::Options::create();
    no->timeout = opt.timeout;  // NCCL's own default is 10 minutes; Gloo's here is 60 s
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("pg", store_),
                                                            opt.rank, opt.world, no);
    // Without a bound device NCCL guesses rank % local GPUs for its first communicator, which is not the rank's GPU
    // when ranks span hosts with several GPUs each.
    if (opt.cuda_device >= 0) compat::bind_device(*nccl, opt.cuda_device);
    pg_ = nccl;
    ctrl_ = gloo("ctrl");
  }
#endif
  else {
    throw std::invalid_argument("backend '" + opt.backend + "' is not available in this build");
  }
}

Dist::~Dist() = default;

c10::intrusive_ptr<c10d::Work> Dist::allreduce(std::vector<at::Tensor>& tensors) { return pg_->allreduce(tensors); }

void Dist::barrier() { ctrl_->barrier()->wait(); }

void Dist::broadcast(at::Tensor& t, int root) {
  std::vector<at::Tensor> v{t};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  (t.is_cuda() ? pg_ : ctrl_)->broadcast(v, o)->wait();
}

void Dist::store_set(const std::string& key, const std::string& value) {
  store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string Dist::store_get(const std::string& key) {
  auto v = store_->get(key);
  return std::string(v.begin(), v.end());
}

std::vector<std::string> Dist::exchange(const std::string& key, const std::string& mine) {
  store_set(key + "/" + std::to_string(opt_.rank), mine);
  std::vector<std::string> all;
  for (int r = 0; r < opt_.world; ++r) all.push_back(store_get(key + "/" + std::to_string(r)));
  return all;
}

prof::ClockOffset Dist::measure_clock_offset(int rounds) {
  // Rank 0 pings each peer in turn; the peer answers with its clock. Rank 0 then tells each peer its offset.
  at::Tensor buf = at::zeros({2}, at::kLong);
  std::vector<at::Tensor> v{buf};
  prof::ClockOffset mine;
  mine.valid = true;
  if (opt_.rank == 0) {
    for (int peer = 1; peer < opt_.world; ++peer) {
      std::vector<prof::PingRound> samples;
      for (int i = 0; i < rounds; ++i) {
        prof::PingRound s;
        s.local_send_ns = prof::monotonic_ns();
        buf[0] = s.local_send_ns;
        ctrl_->send(v, peer, 1)->wait();
        ctrl_->recv(v, peer, 2)->wait();
        s.local_recv_ns = prof::monotonic_ns();
        s.peer_ns = buf[1].item<int64_t>();
        samples.push_back(s);
      }
      prof::ClockOffset est = prof::estimate_offset(samples);
      // The peer's offset to rank 0 is the negation of rank 0's offset to the peer.
      buf[0] = -est.peer_minus_local_ns;
      buf[1] = est.uncertainty_ns;
      ctrl_->send(v, peer, 3)->wait();
    }
    mine.rounds = static_cast<uint32_t>(rounds);
  } else {
    for (int i = 0; i < rounds; ++i) {
      ctrl_->recv(v, 0, 1)->wait();
      buf[1] = prof::monotonic_ns();
      ctrl_->send(v, 0, 2)->wait();
    }
    ctrl_->recv(v, 0, 3)->wait();
    mine.peer_minus_local_ns = buf[0].item<int64_t>();
    mine.uncertainty_ns = buf[1].item<int64_t>();
    mine.rounds = static_cast<uint32_t>(rounds);
  }
  return mine;
}

}  // namespace ddp
