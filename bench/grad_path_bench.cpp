// Where the default job's gradient-sync time goes (issue: "a gradient path close to Gloo's own speed"). In one run,
// two ranks over Gloo on loopback (this program forks them) time, for the default job's gradient bytes:
//   (a) a bare allreduce of one flat tensor,
//   (b) our GradSync path around the same allreduce (bucket views, hooks, launch, finish's wait), minus the backward,
// then (c) the default job's median step with 2 ranks and with 1 (the real binary, --no-record), and prints the
// ratios against their targets. Medians over many iterations; the machine is shared, so read ratios, not times.
//
//   build/bench/grad_path_bench [ITERATIONS]
#include <sys/wait.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/train/dist.h"
#include "runtime/train/grad_sync.h"
#include "traces/stats.h"

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The default job's parameters: MLP 128-512-2 (268,296 bytes of float32 gradients).
std::vector<at::Tensor> default_params() {
  return {torch::randn({512, 128}).requires_grad_(), torch::randn({512}).requires_grad_(),
          torch::randn({2, 512}).requires_grad_(), torch::randn({2}).requires_grad_()};
}

// A backward that gives every parameter a gradient (as cheap as possible: the sync is what is measured).
void backward(const std::vector<at::Tensor>& params) {
  at::Tensor loss = params[0].sum();
  for (size_t i = 1; i < params.size(); ++i) loss = loss + params[i].sum();
  loss.backward();
}

struct RankResult {
  double bare_ms, sync_ms, backward_ms;
};

RankResult run_rank(int rank, int port, int iterations) {
  at::set_num_threads(1);
  ddp::DistOptions o;
  o.rank = rank;
  o.world = 2;
  o.master_port = port;
  ddp::Dist dist(o);
  std::vector<at::Tensor> params = default_params();
  int64_t numel = 0;
  for (const auto& p : params) numel += p.numel();
  at::Tensor flat = torch::ones({numel});
  std::vector<double> bare, with_sync, no_sync;
  for (int i = 0; i < iterations; ++i) {
    dist.barrier();
    auto t0 = Clock::now();
    std::vector<at::Tensor> v{flat};
    dist.allreduce(v)->wait();
    bare.push_back(ms_since(t0));
  }
  ddp::GradSync sync(params, dist, 25.0);
  for (int i = 0; i < iterations; ++i) {
    for (bool on : {false, true}) {
      dist.barrier();
      auto t0 = Clock::now();
      sync.begin_backward(on, ddp::prof::StepContext{});
      backward(params);
      sync.finish();
      (on ? with_sync : no_sync).push_back(ms_since(t0));
      sync.zero_grad();
    }
  }
  return {ddp::median(bare), ddp::median(with_sync), ddp::median(no_sync)};
}

double job_step_ms(int nproc, const std::string& dir) {
  const std::string cmd = std::string(DDP_PROFILE_EXE) + " --record --no-record --nproc " + std::to_string(nproc) +
                          " --max-steps 300 --out " + dir + " > " + dir + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) return -1;
  std::ifstream in(dir + "/manifest.json");
  auto m = nlohmann::json::parse(in, nullptr, false);
  std::vector<double> v;
  for (const auto& r : m["ranks"]) v.push_back(r["step_time_median_ms"].get<double>());
  return v.empty() ? -1 : *std::max_element(v.begin(), v.end());
}
}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 400;
  const int port = 21000 + ::getpid() % 20000;
  int pipes[2];
  if (::pipe(pipes) != 0) return 1;
  pid_t kids[2];
  for (int r = 0; r < 2; ++r) {
    kids[r] = ::fork();
    if (kids[r] == 0) {
      RankResult res = run_rank(r, port, iterations);
      if (r == 0 && ::write(pipes[1], &res, sizeof(res)) != static_cast<ssize_t>(sizeof(res))) ::_exit(1);
      ::_exit(0);
    }
  }
  RankResult res{};
  const bool got = ::read(pipes[0], &res, sizeof(res)) == static_cast<ssize_t>(sizeof(res));
  for (pid_t k : kids) ::waitpid(k, nullptr, 0);
  if (!got) {
    std::fprintf(stderr, "grad_path_bench: a rank failed\n");
    return 1;
  }
  char tmpl[] = "/tmp/grad_path_bench_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl) ? tmpl : "/tmp";
  const double two = job_step_ms(2, dir + "/two"), one = job_step_ms(1, dir + "/one");
  const double path_ms = res.sync_ms - res.backward_ms;
  std::printf("bare Gloo allreduce of 268,296 bytes (2 ranks):   %.3f ms\n", res.bare_ms);
  std::printf("GradSync path around it (minus backward):        %.3f ms  ratio %.2f  (target <= 1.50)\n", path_ms,
              path_ms / res.bare_ms);
  std::printf("default job step: 2 ranks %.3f ms, 1 rank %.3f ms\n", two, one);
  std::printf("2-rank step / (1-rank step + 1.25 x bare):        ratio %.2f  (target <= 1.00)\n",
              two / (one + 1.25 * res.bare_ms));
  return 0;
}
