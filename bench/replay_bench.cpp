// The what-if replay at scale (issue 43's target: 1,000 steps x 64 ranks replayed in <= 1 s): a synthetic run of that
// size (tests/support/synthetic_run.h: loader workers, four buckets with their bytes), then --what-if as ddp_profile
// runs it (each rank's data prepared, the replay as measured and the edited one), timed per edit. Prints the ratio to
// the target; the run's load is timed apart (it is --analyze's, not the replay's).
//   REPLAY_BENCH_RANKS / REPLAY_BENCH_STEPS  another size (default 64 x 1000)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/remove_tree.h"
#include "tests/support/synthetic_run.h"
#include "traces/native/load_run.h"
#include "traces/replay/what_if.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int main() {
  constexpr double kTargetS = 1.0;
  ddp::viewer::SyntheticRunOptions o;
  o.ranks = env_int("REPLAY_BENCH_RANKS", 64);
  o.steps = env_int("REPLAY_BENCH_STEPS", 1000);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ddp_replay_bench_" + std::to_string(::getpid()))).string();
  std::string err;
  if (ddp::viewer::write_synthetic_run(dir, o, err) < 0) {
    std::fprintf(stderr, "replay_bench: %s\n", err.c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  ddp::RunTrace run;
  if (!ddp::load_run(dir, run, err)) {
    std::fprintf(stderr, "replay_bench: %s\n", err.c_str());
    return 1;
  }
  std::printf("replay_bench: %d ranks x %d steps, loaded in %.3f s\n", o.ranks, o.steps, seconds_since(t0));
  int rc = 0;
  for (const char* edit : {"rank1.forward=median", "workers=4", "bandwidth=100GB/s", "bucket_cap_mb=50"}) {
    std::vector<ddp::WhatIfEdit> edits;
    if (!ddp::parse_what_if(edit, edits, err)) {
      std::fprintf(stderr, "replay_bench: %s\n", err.c_str());
      return 1;
    }
    t0 = std::chrono::steady_clock::now();
    ddp::WhatIf w;
    if (!ddp::what_if(run, edits, w, err) || !w.result.ok) {
      std::fprintf(stderr, "replay_bench: %s: %s%s\n", edit, err.c_str(), w.result.error.c_str());
      rc = 1;
      continue;
    }
    const double s = seconds_since(t0);
    std::printf("  %-22s %.3f s (%.2fx the %.0f s target), fit %.2f%%, predicted %.3f ms a step\n", edit, s,
                s / kTargetS, kTargetS, 100 * w.result.error_mean, w.result.step_ms);
  }
  ddp::testing::remove_tree(dir);
  return rc;
}
