// Where the default job's gradient-sync time goes (issue: "a gradient path close to Gloo's own speed"). In one run,
// two ranks over Gloo on loopback (this program forks them) time, for the default job's gradient bytes:
//   (a) a bare allreduce of one flat tensor,
//   (b) our GradSync path around the same allreduce (bucket views, hooks, launch, finish's wait), minus the backward,
// then (c) the default job's step with 2 ranks and with 1 (the real binary, --no-record; median, mean, p90) and the
// recorded job's mean allreduce span, and (d) PyTorch's own
// Python DDP on the same job (bench/python_ddp_step.py under Debian's python3-torch, DataLoader num_workers 0 and 2;
// skipped with a message when that torch is not installed), and prints the ratios against their targets. Medians
// over many iterations; the machine is shared, so read ratios, not times.
//
//   build/bench/grad_path_bench [ITERATIONS [ROUNDS]]   (ROUNDS: recorded and unrecorded job runs, alternating)
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "runtime/common/job_config.h"
#include "runtime/launch/environment/cpu_sets.h"
#include "runtime/train/dist.h"
#include "runtime/train/grad_sync.h"
#include "traces/base/stats.h"
#include "traces/model/manifest.h"

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
  double bare_ms, sync_ms, backward_ms, after_compute_ms, compute_ms, bare_step_ms, bare_wait_ms;
};

// The default job's step with none of the job around it (no loader, no heartbeat, no supervisor): MLP 128-512-2 on a
// fixed batch of 64, cross entropy, backward through GradSync, AdamW. Median step, and median time finish() waited.
std::pair<double, double> bare_training_steps(ddp::Dist& dist, int iterations) {
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(128, 512), torch::nn::ReLU(), torch::nn::Linear(512, 2));
  std::vector<at::Tensor> params = net->parameters();
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(1e-3));
  ddp::GradSync sync(params, dist, 25.0);
  sync.poll_before_blocking(std::chrono::microseconds(ddp::JobConfig{}.comm_poll_us));  // as the job does
  at::Tensor x = torch::randn({64, 128}), y = (x.select(1, 0) > 0).to(torch::kLong);
  std::vector<double> step, waited;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = Clock::now();
    sync.begin_backward(true, ddp::prof::StepContext{});
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    auto t1 = Clock::now();
    sync.finish();
    waited.push_back(ms_since(t1));
    opt.step();
    sync.zero_grad();
    step.push_back(ms_since(t0));
  }
  return {ddp::median(step), ddp::median(waited)};
}

RankResult run_rank(int rank, int port, int iterations) {
  at::set_num_threads(1);
  // As the job's ranks run (runtime/launch/environment/cpu_sets.h, batch_scheduling.h): each on its own share of the
  // cores, Gloo's threads under SCHED_BATCH, so the bare allreduce is Gloo at its best here too.
  const auto cpu_sets = ddp::rank_cpu_sets(ddp::allowed_cpus(), 2);
  if (!cpu_sets.empty()) ddp::pin_process(cpu_sets[rank]);
  ddp::DistOptions o;
  o.rank = rank;
  o.world = 2;
  o.master_port = port;
  o.gloo_batch_sched = true;
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
  // The same allreduce as a training step meets it: right after ~0.5 ms of matrix work, no barrier first (the
  // ranks arrive when their compute ends, Gloo's threads have slept through it).
  std::vector<double> after_compute, compute;
  at::Tensor a = torch::randn({256, 256}), c;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = Clock::now();
    for (int k = 0; k < 8; ++k) c = at::mm(a, a);
    compute.push_back(ms_since(t0));
    auto t1 = Clock::now();
    std::vector<at::Tensor> v{flat};
    dist.allreduce(v)->wait();
    after_compute.push_back(ms_since(t1));
  }
  const auto [bare_step, bare_wait] = bare_training_steps(dist, iterations);
  ddp::GradSync sync(params, dist, 25.0);
  sync.poll_before_blocking(std::chrono::microseconds(ddp::JobConfig{}.comm_poll_us));
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
  return {ddp::median(bare),
          ddp::median(with_sync),
          ddp::median(no_sync),
          ddp::median(after_compute),
          ddp::median(compute),
          bare_step,
          bare_wait};
}

// The default job's step (the real binary, 300 steps): the slower rank's median, mean and p90 from the manifest, and
// with recording the mean `allreduce` span from --summary. Negative when the run fails.
struct JobSteps {
  double median_ms = -1, mean_ms = -1, p90_ms = -1, allreduce_ms = -1;
  double steady_mean_ms = -1;  // the mean without the first step (its one-time costs: threads, buffers, caches)
};

JobSteps job_steps(int nproc, bool record, const std::string& dir) {
  JobSteps out;
  const std::string exe = DDP_PROFILE_EXE;
  const std::string cmd = exe + " --record" + (record ? "" : " --no-record") + " --nproc " + std::to_string(nproc) +
                          " --max-steps 300 --out " + dir + " > " + dir + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) return out;
  ddp::Manifest m;
  std::string err;
  if (!ddp::read_manifest(dir, m, err) || !m.fields.ranks) return out;
  for (const ddp::records::manifest_rank& r : *m.fields.ranks) {
    if (!r.steps || !r.step_time_median_ms || !r.step_time_mean_ms || !r.step_time_p90_ms || !r.step_time_first_ms)
      return out;  // not our job's end-of-run entry
    out.median_ms = std::max(out.median_ms, *r.step_time_median_ms);
    out.mean_ms = std::max(out.mean_ms, *r.step_time_mean_ms);
    out.p90_ms = std::max(out.p90_ms, *r.step_time_p90_ms);
    const double n = static_cast<double>(*r.steps);
    if (n > 1)
      out.steady_mean_ms = std::max(out.steady_mean_ms, (*r.step_time_mean_ms * n - *r.step_time_first_ms) / (n - 1));
  }
  if (!record) return out;
  const std::string summary = dir + ".summary.json";
  if (std::system((exe + " --summary " + dir + " --json > " + summary + " 2>&1").c_str()) != 0) return out;
  std::ifstream sin(summary);
  const auto sj = nlohmann::json::parse(sin, nullptr, false);
  if (sj.is_discarded() || !sj.contains("ranks")) return out;
  for (const auto& r : sj["ranks"]) {
    const auto& ar = r["stages"]["allreduce"];
    if (ar.value("count", 0) > 0)
      out.allreduce_ms = std::max(out.allreduce_ms, ar["total_ms"].get<double>() / ar["count"].get<double>());
  }
  return out;
}

// Python DDP's median step on the default job, or -1 when Debian's python3-torch is missing or the run fails.
// `launch_prefix` runs it under another command (chrt -b 0: the scheduling policy our ranks use).
double python_ddp_step_ms(int workers, const std::string& log, const std::string& launch_prefix = "") {
  const std::string py = "/usr/bin/python3";
  if (std::system((py + " -c 'import torch' > /dev/null 2>&1").c_str()) != 0) return -1;
  const std::string cmd = launch_prefix + py + " " + DDP_SOURCE_DIR + "/bench/python_ddp_step.py --workers " +
                          std::to_string(workers) + " > " + log + " 2>&1";
  if (std::system(cmd.c_str()) != 0) return -1;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("python_ddp_step_ms=", 0) == 0) return std::atof(line.c_str() + 19);
  return -1;
}
// The mean of each figure over runs (a failed run, negative, fails the whole figure).
JobSteps mean_of(const std::vector<JobSteps>& runs) {
  auto avg = [&](double JobSteps::*f) {
    double sum = 0;
    for (const JobSteps& r : runs) {
      if (r.*f < 0) return -1.0;
      sum += r.*f;
    }
    return runs.empty() ? -1.0 : sum / static_cast<double>(runs.size());
  };
  JobSteps m;
  m.median_ms = avg(&JobSteps::median_ms);
  m.mean_ms = avg(&JobSteps::mean_ms);
  m.p90_ms = avg(&JobSteps::p90_ms);
  m.allreduce_ms = avg(&JobSteps::allreduce_ms);
  m.steady_mean_ms = avg(&JobSteps::steady_mean_ms);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 400;
  const int rounds = std::max(1, argc > 2 ? std::atoi(argv[2]) : 10);
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
  const JobSteps one_steps = job_steps(1, false, dir + "/one");
  // Recorded against unrecorded: the job runs `rounds` times each, alternating, so that a slower minute of a shared
  // machine falls on both (one pair of runs differs by up to ±10 % here from the machine alone). Each kind's figures
  // are the means over its runs; the pairs' own ratios show the spread.
  std::vector<JobSteps> plain, traced;
  for (int round = 0; round < rounds; ++round) {
    plain.push_back(job_steps(2, false, dir + "/two" + std::to_string(round)));
    traced.push_back(job_steps(2, true, dir + "/recorded" + std::to_string(round)));
  }
  const JobSteps two_steps = mean_of(plain), recorded = mean_of(traced);
  const double two = two_steps.median_ms, one = one_steps.median_ms;
  const double path_ms = res.sync_ms - res.backward_ms;
  std::printf("bare Gloo allreduce of 268,296 bytes (2 ranks):   %.3f ms\n", res.bare_ms);
  std::printf(
      "the same allreduce right after %.3f ms of compute:  %.3f ms  (no barrier: as a training step meets it)\n",
      res.compute_ms, res.after_compute_ms);
  std::printf("GradSync path around it (minus backward):        %.3f ms  ratio %.2f  (target <= 1.50)\n", path_ms,
              path_ms / res.bare_ms);
  std::printf("the default step without the job around it: %.3f ms, of which finish() waited %.3f ms\n",
              res.bare_step_ms, res.bare_wait_ms);
  std::printf("default job step (median / mean / p90): 2 ranks %.3f / %.3f / %.3f ms, 1 rank %.3f / %.3f / %.3f ms\n",
              two, two_steps.mean_ms, two_steps.p90_ms, one, one_steps.mean_ms, one_steps.p90_ms);
  std::printf("2-rank step / (1-rank step + 1.25 x bare):        ratio %.2f  (target <= 1.00; on the means %.2f)\n",
              two / (one + 1.25 * res.bare_ms), two_steps.mean_ms / (one_steps.mean_ms + 1.25 * res.bare_ms));
  std::printf("recorded job: step median / mean / p90 %.3f / %.3f / %.3f ms\n", recorded.median_ms, recorded.mean_ms,
              recorded.p90_ms);
  std::vector<double> pair_ratios;
  for (int round = 0; round < rounds; ++round) pair_ratios.push_back(traced[round].mean_ms / plain[round].mean_ms);
  // How well the pairs pin the ratio down: 1.96 standard errors of their mean (one pair varies by ~±5 % here).
  double pm = 0, pv = 0;
  for (double r : pair_ratios) pm += r / rounds;
  for (double r : pair_ratios) pv += (r - pm) * (r - pm) / std::max(1, rounds - 1);
  std::printf(
      "recorded / unrecorded step, mean of %d alternating runs each: ratio %.3f  (target <= 1.05; pairs "
      "%.3f-%.3f, their mean %.3f +- %.3f; without the first step %.3f)\n",
      rounds, recorded.mean_ms / two_steps.mean_ms, *std::min_element(pair_ratios.begin(), pair_ratios.end()),
      *std::max_element(pair_ratios.begin(), pair_ratios.end()), pm, 1.96 * std::sqrt(pv / rounds),
      recorded.steady_mean_ms / two_steps.steady_mean_ms);
  std::printf("recorded / unrecorded step, medians:               ratio %.3f\n",
              recorded.median_ms / two_steps.median_ms);
  std::printf("recorded allreduce span (mean) %.3f ms / bare:     ratio %.2f  (target <= 1.50)\n",
              recorded.allreduce_ms, recorded.allreduce_ms / res.bare_ms);
  const struct {
    int workers;
    double target;
  } python_runs[] = {{0, 0.65}, {2, 0.30}};
  for (const auto& p : python_runs) {
    const double py = python_ddp_step_ms(p.workers, dir + "/python" + std::to_string(p.workers) + ".log");
    if (py <= 0) {
      std::printf(
          "Python DDP (num_workers=%d): skipped: /usr/bin/python3 with torch (Debian's python3-torch) is "
          "not installed or its run failed (%s/python%d.log)\n",
          p.workers, dir.c_str(), p.workers);
      continue;
    }
    std::printf("Python DDP step (num_workers=%d): %.3f ms; ours / theirs:   ratio %.2f  (target <= %.2f)\n", p.workers,
                py, two / py, p.target);
    // Not a target: what our scheduling policy alone would give them (their Gloo has the same event-loop spin).
    const double py_batch =
        python_ddp_step_ms(p.workers, dir + "/python" + std::to_string(p.workers) + "_batch.log", "chrt -b 0 ");
    if (py_batch > 0)
      std::printf("  the same under SCHED_BATCH (chrt -b 0): %.3f ms; ours / theirs: ratio %.2f\n", py_batch,
                  two / py_batch);
  }
  return 0;
}
